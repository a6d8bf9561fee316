"""Scrapes a gpp-coordinator's /metrics while its job trains and checks it
with Debian's prometheus_client parser (run with /usr/bin/python3).

usage: scrape_metrics.py PORT SECONDS AGENTS
Exit 0 once a scrape taken in state training after an iteration parses and
holds every metric the operator's guide lists with its labels; 1 otherwise
(the last problem on stderr). Prints the stages it saw."""
import sys
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

port, seconds, n_agents = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
url = "http://127.0.0.1:%s/metrics" % port

# family -> (type, label names of every sample)
WANT = {
    "gpp_build_info": ("gauge", {"version", "commit"}),
    "gpp_coordinator_start_time_seconds": ("gauge", set()),
    "gpp_job_state": ("gauge", {"state"}),
    "gpp_agents": ("gauge", {"state"}),
    "gpp_agent_up": ("gauge", {"rank", "host", "slot", "device", "device_name"}),
    "gpp_agent_state": ("gauge", {"rank", "host", "slot", "state"}),
    "gpp_agent_heartbeat_age_seconds": ("gauge", {"rank", "host", "slot"}),
    "gpp_agent_memory_limit_bytes": ("gauge", {"rank", "host", "slot"}),
    "gpp_agent_memory_high_water_bytes": ("gauge", {"rank", "host", "slot", "stage"}),
    "gpp_agent_compute_seconds": ("gauge", {"rank", "host", "slot", "stage"}),
    "gpp_agent_comm_seconds": ("gauge", {"rank", "host", "slot", "stage"}),
    "gpp_agent_idle_seconds": ("gauge", {"rank", "host", "slot", "stage"}),
    "gpp_stage_compute_seconds": ("gauge", {"stage"}),
    "gpp_stage_comm_seconds": ("gauge", {"stage"}),
    "gpp_stage_idle_seconds": ("gauge", {"stage"}),
    "gpp_stage_memory_predicted_bytes": ("gauge", {"stage"}),
    "gpp_stage_memory_peak_bytes": ("gauge", {"stage"}),
    "gpp_iterations_planned": ("gauge", set()),
    # counters: the parser names the family without _total
    "gpp_iterations_completed": ("counter", set()),
    "gpp_samples": ("counter", set()),
    "gpp_iteration_seconds": ("gauge", set()),
    "gpp_samples_per_second": ("gauge", set()),
    "gpp_loss": ("gauge", set()),
    "gpp_control_messages_dropped": ("counter", set()),
    "gpp_job_restarts": ("counter", set()),
    "gpp_agent_restarts": ("counter", {"rank", "host", "slot"}),
}


def check(text):
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    state = [s.labels["state"] for s in fams["gpp_job_state"].samples if s.value == 1]
    if state != ["training"]:
        return "state %s" % state
    done = fams["gpp_iterations_completed"].samples[0].value
    if done < 1:
        return "no iteration complete yet"
    for name, (typ, labels) in WANT.items():
        f = fams.get(name)
        if f is None:
            return "no family %s" % name
        if f.type != typ:
            return "%s is a %s, want %s" % (name, f.type, typ)
        if not f.samples:
            return "%s has no samples" % name
        for s in f.samples:
            if set(s.labels) != labels:
                return "%s labels %s, want %s" % (name, sorted(s.labels), sorted(labels))
            if not name.startswith("gpp_"):
                return "%s lacks the gpp_ prefix" % name
    per_stage = {s.labels["stage"] for s in fams["gpp_stage_compute_seconds"].samples}
    of_agents = {s.labels["stage"] for s in fams["gpp_agent_compute_seconds"].samples}
    if per_stage != of_agents:
        return "stages %s, but the agents run %s" % (sorted(per_stage), sorted(of_agents))
    global stages
    stages = len(per_stage)
    if len(fams["gpp_agent_up"].samples) != n_agents:
        return "%d agents, want %d" % (len(fams["gpp_agent_up"].samples), n_agents)
    if any(s.value != 1 for s in fams["gpp_agent_up"].samples):
        return "an agent is down"
    current = [s.labels["state"] for s in fams["gpp_agent_state"].samples if s.value == 1]
    if current != ["alive"] * n_agents or len(fams["gpp_agent_state"].samples) != 4 * n_agents:
        return "agent states %s, want one of 4 per agent, alive" % current
    if fams["gpp_job_restarts"].samples[0].value != 0 or any(
            s.value != 0 for s in fams["gpp_agent_restarts"].samples):
        return "restarts counted in a job that never restarted"
    if len(fams["gpp_agent_restarts"].samples) != n_agents:
        return "%d agent restart counters, want %d" % (len(fams["gpp_agent_restarts"].samples), n_agents)
    it = fams["gpp_iteration_seconds"].samples[0].value
    sps = fams["gpp_samples_per_second"].samples[0].value
    if not (it > 0 and sps > 0):
        return "iteration %g s, %g samples/s" % (it, sps)
    for st in ("compute", "idle"):
        if not all(s.value >= 0 for s in fams["gpp_stage_%s_seconds" % st].samples):
            return "negative %s time" % st
    return None


deadline = time.time() + seconds
problem = "no scrape"
while time.time() < deadline:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            ctype = r.headers.get("Content-Type", "")
            text = r.read().decode()
        if not ctype.startswith("text/plain; version=0.0.4"):
            problem = "content type %r" % ctype
        else:
            problem = check(text)
            if problem is None:
                print("scraped and parsed %d bytes during training, %d stages" % (len(text), stages))
                sys.exit(0)
    except Exception as e:  # not listening yet, or a parse error: try again
        problem = "%s: %s" % (type(e).__name__, e)
    time.sleep(0.05)
print("scrape_metrics: %s" % problem, file=sys.stderr)
sys.exit(1)

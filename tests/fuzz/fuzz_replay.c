/* fuzz_replay: main() of a fuzz harness built without libFuzzer (the default
 * gcc build). Runs every file named on the command line, or held in a
 * directory named there, through LLVMFuzzerTestOneInput once, so that the
 * seed corpus and every crash input added to it stay a regression test.
 * Prints "N inputs" and exits 0; a failing input aborts as under libFuzzer. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/gpp_fuzz.h"

static int s_run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    for (size_t n; buf && (n = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += n;
        if (len == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf)
        abort();
    /* an exact-size copy, so that ASan sees reads past the input */
    uint8_t *exact = malloc(len ? len : 1);
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int s_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int n = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "%s: no such file or directory\n", argv[i]);
            bad++;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad += s_run_file(argv[i]) < 0;
            n++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        char **names = NULL;
        size_t k = 0;
        for (struct dirent *e; d && (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            names = realloc(names, (k + 1) * sizeof *names);
            size_t len = strlen(argv[i]) + strlen(e->d_name) + 2;
            names[k] = malloc(len);
            snprintf(names[k++], len, "%s/%s", argv[i], e->d_name);
        }
        if (d)
            closedir(d);
        qsort(names, k, sizeof *names, s_cmp); /* a fixed order: deterministic */
        for (size_t j = 0; j < k; j++) {
            bad += s_run_file(names[j]) < 0;
            n++;
            free(names[j]);
        }
        free(names);
    }
    printf("%d inputs\n", n);
    return bad || n == 0 ? 1 : 0;
}

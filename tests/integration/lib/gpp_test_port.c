/* gpp-test-port [N]: prints N (default 1) distinct TCP ports on 127.0.0.1
 * that the kernel says are free (gpp_test_free_port), one per line, for the
 * shell tests (lib/gpp_test.sh: free_port). Exit status 1 when no socket can
 * be had. */
#include <stdlib.h>

#include "tests/gpp_test.h"

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1, ports[64];
    if (n < 1 || n > 64) {
        fprintf(stderr, "usage: gpp-test-port [N], N in 1..64\n");
        return 2;
    }
    for (int i = 0; i < n; i++) {
        int again = 1;
        for (int tries = 0; again && tries < 100; tries++) {
            ports[i] = gpp_test_free_port();
            if (ports[i] < 0) {
                perror("gpp-test-port");
                return 1;
            }
            again = 0;
            for (int j = 0; j < i; j++)
                again |= ports[j] == ports[i];
        }
        printf("%d\n", ports[i]);
    }
    return 0;
}

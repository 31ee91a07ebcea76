/* cli_main.c — the flux command line (placeholder until the CLI lands). */
#include <stdio.h>
#include <string.h>

#include "../flux.h"

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("%s\n", flux_build_info());
        return 0;
    }
    fprintf(stderr, "flux: the command line is not yet available\n");
    return 1;
}

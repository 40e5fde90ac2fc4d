/* A refused pp_map* sets errno as well as the message: the system's errno
 * where it said why, EINVAL for a bad argument. Run by
 * crates/capi/tests/c_api.rs with a scratch directory as argv[1]; prints
 * "FAIL ..." and exits 1 on the first failed check. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "pagepilot.h"

static char err[PP_ERR_MAX];

/* errno and the message after a call that must be refused. */
static void expect(pp_region *r, int want, const char *needle, const char *what) {
    int got = errno; /* read first: the checks below may set it */
    CHECK(r == NULL, "%s was mapped", what);
    CHECK(got == want, "%s: errno %d (%s), want %d (%s); message: %s", what, got,
          strerror(got), want, strerror(want), err);
    CHECK(strstr(err, needle) != NULL, "%s: message \"%s\" lacks \"%s\"", what, err, needle);
    printf("%s: errno %d, %s\n", what, got, err);
}

/* Clears errno and the message before a call, so that a stale one cannot pass. */
static void reset(void) {
    errno = 0;
    err[0] = 0;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    char file[512], missing[512], under_file[600];
    snprintf(file, sizeof file, "%s/data.bin", argv[1]);
    snprintf(missing, sizeof missing, "%s/does-not-exist.bin", argv[1]);
    snprintf(under_file, sizeof under_file, "%s/x", file);
    int fd = open(file, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    CHECK(fd >= 0 && ftruncate(fd, 16 * 4096) == 0, "create %s: %s", file, strerror(errno));
    close(fd);

    reset();
    expect(pp_map_file(missing, 0, 1 << 20, "lru", err, sizeof err), ENOENT,
           "does-not-exist.bin", "missing file");
    /* The system's own errno, and its words after the message (the cause). */
    reset();
    expect(pp_map_file(under_file, 0, 1 << 20, "lru", err, sizeof err), ENOTDIR,
           strerror(ENOTDIR), "a path through a file");
    reset();
    expect(pp_map_file(NULL, 0, 1 << 20, "lru", err, sizeof err), EINVAL, "NULL", "NULL path");
    reset();
    expect(pp_map_file(file, 0, 100, "lru", err, sizeof err), EINVAL, "budget",
           "budget below one page");
    reset();
    expect(pp_map_file(file, 0, 1 << 20, "no-such-policy", err, sizeof err), EINVAL,
           "no-such-policy", "unknown policy");
    reset();
    expect(pp_map_anon(0, 1 << 20, "lru", err, sizeof err), EINVAL, "length", "zero length");
    reset();
    expect(pp_map(NULL, err, sizeof err), EINVAL, "NULL", "NULL options");
    pp_options o;
    pp_options_init(&o);
    o.size = 1;
    reset();
    expect(pp_map(&o, err, sizeof err), EINVAL, "pp_options_init", "options of another size");
    reset();
    expect(pp_map_persistent("absent", argv[1], 0, 1 << 20, "lru", err, sizeof err), ENOENT,
           "absent", "missing persistent dataspace");
    reset();
    expect(pp_map_persistent(".hidden", argv[1], 4096, 1 << 20, "lru", err, sizeof err),
           EINVAL, ".hidden", "bad dataspace name");
    /* Without an err buffer errno still says why. */
    errno = 0;
    CHECK(pp_map_file(missing, 0, 1 << 20, "lru", NULL, 0) == NULL && errno == ENOENT,
          "no err buffer: errno %d", errno);

    unlink(file);
    printf("OK\n");
    return 0;
}

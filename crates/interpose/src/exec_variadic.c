/* The exec functions whose arguments come as a variadic list (execl,
 * execlp, execle), which stable Rust cannot define: each gathers its list
 * into an array and calls the array form (execv, execvp, execve), which
 * the interposer defines (src/exec.rs) and which writes the regions back
 * before the image is replaced. glibc's own execl calls its internal
 * execve, which no interposer sees. Hidden: the library exports them as
 * `execl` and friends through naked Rust functions that jump here (a
 * cdylib exports only symbols defined in Rust). */
#include <errno.h>
#include <stdarg.h>
#include <unistd.h>

#define MAX_ARGS 4096

#define GATHER(first, args, ap)                                   \
    do {                                                          \
        args[0] = (char *)(first);                                \
        int n_ = 1;                                               \
        while (args[n_ - 1] != NULL) {                            \
            if (n_ == MAX_ARGS) {                                 \
                va_end(ap);                                       \
                errno = E2BIG;                                    \
                return -1;                                        \
            }                                                     \
            args[n_++] = va_arg(ap, char *);                      \
        }                                                         \
    } while (0)

__attribute__((visibility("hidden"))) int pagepilot_run_execl(const char *path, const char *arg, ...) {
    char *args[MAX_ARGS];
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, args, ap);
    va_end(ap);
    return execv(path, args);
}

__attribute__((visibility("hidden"))) int pagepilot_run_execlp(const char *file, const char *arg, ...) {
    char *args[MAX_ARGS];
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, args, ap);
    va_end(ap);
    return execvp(file, args);
}

__attribute__((visibility("hidden"))) int pagepilot_run_execle(const char *path, const char *arg, ...) {
    char *args[MAX_ARGS];
    va_list ap;
    va_start(ap, arg);
    GATHER(arg, args, ap);
    char *const *envp = va_arg(ap, char *const *);
    va_end(ap);
    return execve(path, args, envp);
}

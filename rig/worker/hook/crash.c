/* The backend stubs' crash recorder: a marker file when a stub dies of a signal of its own.
 *
 * Plain C, no Python.h: rig/hook/crashlib.py compiles it on first use, the worker names the
 * library in RIG_CRASH_LIB, and the evidence hook (rig/hook/evidence.py) calls rig_crash_arm
 * through ctypes as the stub's interpreter starts. A stub is the core's child (the core reaps
 * it), so the rig never sees its exit status; and a stub can crash after its Python is
 * finalized (server#8662: SIGSEGV in the stub's destructors, after finalize ran), where no
 * Python handler (faulthandler) runs any more. This handler does.
 *
 * On SIGSEGV, SIGBUS, SIGABRT, SIGFPE or SIGILL the handler writes
 * <evidence dir>/<pid>-crash-<signal>.json ({"pid": .., "phase": "crash", "signal": ..,
 * "t_mono": ..}, under a temporary name, then renamed), with async-signal-safe calls only
 * (open, write, close, rename, getpid, clock_gettime; no malloc, no stdio). Then it puts back
 * the action that was there before it (SIG_DFL for a stub) and raises the signal again: the
 * stub dies exactly as it would have without the recorder. SIGKILL (the rig's own kill of
 * leftover stubs) cannot be caught, and _exit raises nothing: neither leaves a marker.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>  /* rename only: no stream is touched */
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

static const int SIGNALS[] = {SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL};
#define NSIGNALS (sizeof SIGNALS / sizeof SIGNALS[0])

static struct sigaction previous[NSIGNALS];
static char marker_dir[PATH_MAX];
static pid_t armed_pid;   /* a child forked from the stub (multiprocessing) is not the stub */
static int recorded;      /* one marker a process: the first signal is the one that kills it */
static int installed;
/* The arming thread's alternate stack, so that a stack overflow there still reaches the handler. */
static char alt_stack[64 * 1024];

static size_t put_str(char *buf, size_t at, size_t cap, const char *s) {
    while (*s && at + 1 < cap)
        buf[at++] = *s++;
    buf[at] = '\0';
    return at;
}

static size_t put_uint(char *buf, size_t at, size_t cap, unsigned long long v, int min_digits) {
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < (int)sizeof digits);
    while (n < min_digits && n < (int)sizeof digits)
        digits[n++] = '0';
    while (n && at + 1 < cap)
        buf[at++] = digits[--n];
    buf[at] = '\0';
    return at;
}

static void write_marker(int sig) {
    char path[PATH_MAX + 64], tmp[PATH_MAX + 72], text[160];
    size_t n = 0;
    pid_t pid = getpid();
    n = put_str(path, n, sizeof path, marker_dir);
    n = put_str(path, n, sizeof path, "/");
    n = put_uint(path, n, sizeof path, (unsigned long long)pid, 1);
    n = put_str(path, n, sizeof path, "-crash-");
    n = put_uint(path, n, sizeof path, (unsigned long long)sig, 1);
    n = put_str(path, n, sizeof path, ".json");
    n = put_str(tmp, 0, sizeof tmp, path);
    put_str(tmp, n, sizeof tmp, ".tmp");  /* not *.json: a reader never sees half a marker */

    struct timespec now = {0, 0};
    clock_gettime(CLOCK_MONOTONIC, &now);  /* the clock of the other markers (time.monotonic) */
    size_t t = 0;
    t = put_str(text, t, sizeof text, "{\"pid\": ");
    t = put_uint(text, t, sizeof text, (unsigned long long)pid, 1);
    t = put_str(text, t, sizeof text, ", \"phase\": \"crash\", \"signal\": ");
    t = put_uint(text, t, sizeof text, (unsigned long long)sig, 1);
    t = put_str(text, t, sizeof text, ", \"t_mono\": ");
    t = put_uint(text, t, sizeof text, (unsigned long long)now.tv_sec, 1);
    t = put_str(text, t, sizeof text, ".");
    t = put_uint(text, t, sizeof text, (unsigned long long)now.tv_nsec, 9);
    t = put_str(text, t, sizeof text, "}\n");

    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t done = 0;
    while (done < t) {
        ssize_t w = write(fd, text + done, t - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        done += (size_t)w;
    }
    close(fd);
    if (done == t)
        rename(tmp, path);
    else
        unlink(tmp);
}

static void on_crash(int sig) {
    int saved_errno = errno;
    if (getpid() == armed_pid && !__atomic_exchange_n(&recorded, 1, __ATOMIC_SEQ_CST))
        write_marker(sig);
    for (size_t i = 0; i < NSIGNALS; i++) {
        if (SIGNALS[i] == sig) {
            sigaction(sig, &previous[i], NULL);
            break;
        }
    }
    /* Blocked while this handler runs: delivered, with the action put back, as it returns
     * (a fault, or abort()'s raise, alike). */
    raise(sig);
    errno = saved_errno;
}

/* Arm the recorder in this process: markers go to evidence_dir. 0 when armed, -1 when not (a
 * path too long, a sigaction that failed). Arming again changes the folder and the process. */
int rig_crash_arm(const char *evidence_dir) {
    if (!evidence_dir || strlen(evidence_dir) >= sizeof marker_dir)
        return -1;
    put_str(marker_dir, 0, sizeof marker_dir, evidence_dir);
    /* Once a process image: a second install would keep this handler as its own "previous"
     * and raise forever (a forked child inherits the handlers, and "installed" with them). */
    if (!installed) {
        stack_t old_stack;
        if (sigaltstack(NULL, &old_stack) == 0 && (old_stack.ss_flags & SS_DISABLE)) {
            stack_t ss = {.ss_sp = alt_stack, .ss_size = sizeof alt_stack, .ss_flags = 0};
            sigaltstack(&ss, NULL);
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_crash;
        sa.sa_flags = SA_ONSTACK;
        sigfillset(&sa.sa_mask);  /* nothing interrupts the marker */
        for (size_t i = 0; i < NSIGNALS; i++) {
            if (sigaction(SIGNALS[i], &sa, &previous[i]) != 0) {
                for (size_t k = 0; k < i; k++)
                    sigaction(SIGNALS[k], &previous[k], NULL);
                return -1;
            }
        }
        installed = 1;
    }
    armed_pid = getpid();
    recorded = 0;
    return 0;
}

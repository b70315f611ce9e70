/* A native load generator over Triton's in-process C API ("lanes").
 *
 * Plain C, no Python.h: rig/fastpath.py compiles it on first use and drives it with ctypes.
 * Nothing here runs Python, so a request costs no interpreter time: the core's own threads
 * complete a request, record its latency and (closed loop) submit it again.
 *
 * The Triton functions are looked up with dlsym in the core the process has already loaded;
 * their prototypes are declared here from tritonserver.h (C API 1.x; measured on core 2.51).
 *
 * Ownership (tritonserver.h): a request handed to ServerInferAsync belongs to the core until its
 * release callback (flag RELEASE_ALL); if ServerInferAsync fails the caller still owns it. A
 * response belongs to us from the response callback until InferenceResponseDelete, and an
 * output buffer from alloc_fn until the core calls release_fn (when the response is deleted).
 * A request holds a reference to its model, so a lane drops its request objects at stop.
 *
 * Streaming (decoupled) models answer a request with several responses, then the final flag
 * (with the last response, or alone: a NULL response). Per answered request the lane then also
 * records the time to its first response that carries data (to the final flag where none did)
 * and how many did; and each gap between consecutive data responses. A lane records these once
 * it is told the model is decoupled (fp_lane_set_streaming) or sees a response without the
 * final flag, or the flag alone; until then (every non-decoupled model) only the latency.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ the C API we use */

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef int TRITONSERVER_DataType;   /* enums are int-sized in the C ABI */
typedef int TRITONSERVER_MemoryType;

#define TRITONSERVER_MEMORY_CPU 0
#define TRITONSERVER_REQUEST_RELEASE_ALL 1u
#define TRITONSERVER_RESPONSE_COMPLETE_FINAL 1u

typedef TRITONSERVER_Error *(*AllocFn)(TRITONSERVER_ResponseAllocator *, const char *, size_t,
                                        TRITONSERVER_MemoryType, int64_t, void *, void **,
                                        void **, TRITONSERVER_MemoryType *, int64_t *);
typedef TRITONSERVER_Error *(*ReleaseFn)(TRITONSERVER_ResponseAllocator *, void *, void *,
                                          size_t, TRITONSERVER_MemoryType, int64_t);
typedef TRITONSERVER_Error *(*StartFn)(TRITONSERVER_ResponseAllocator *, void *);
typedef void (*RequestReleaseFn)(TRITONSERVER_InferenceRequest *, const uint32_t, void *);
typedef void (*ResponseCompleteFn)(TRITONSERVER_InferenceResponse *, const uint32_t, void *);

static struct {
    int ready;
    void (*ErrorDelete)(TRITONSERVER_Error *);
    const char *(*ErrorMessage)(TRITONSERVER_Error *);
    TRITONSERVER_Error *(*ResponseAllocatorNew)(TRITONSERVER_ResponseAllocator **, AllocFn,
                                                ReleaseFn, StartFn);
    TRITONSERVER_Error *(*RequestNew)(TRITONSERVER_InferenceRequest **, TRITONSERVER_Server *,
                                      const char *, const int64_t);
    TRITONSERVER_Error *(*RequestDelete)(TRITONSERVER_InferenceRequest *);
    TRITONSERVER_Error *(*RemoveAllInputs)(TRITONSERVER_InferenceRequest *);
    TRITONSERVER_Error *(*AddInput)(TRITONSERVER_InferenceRequest *, const char *,
                                    const TRITONSERVER_DataType, const int64_t *, uint64_t);
    TRITONSERVER_Error *(*AppendInputData)(TRITONSERVER_InferenceRequest *, const char *,
                                           const void *, size_t, TRITONSERVER_MemoryType, int64_t);
    TRITONSERVER_Error *(*SetReleaseCallback)(TRITONSERVER_InferenceRequest *, RequestReleaseFn,
                                              void *);
    TRITONSERVER_Error *(*SetResponseCallback)(TRITONSERVER_InferenceRequest *,
                                               TRITONSERVER_ResponseAllocator *, void *,
                                               ResponseCompleteFn, void *);
    TRITONSERVER_Error *(*InferAsync)(TRITONSERVER_Server *, TRITONSERVER_InferenceRequest *,
                                      void *);
    TRITONSERVER_Error *(*ResponseError)(TRITONSERVER_InferenceResponse *);
    TRITONSERVER_Error *(*ResponseDelete)(TRITONSERVER_InferenceResponse *);
    TRITONSERVER_Error *(*OutputCount)(TRITONSERVER_InferenceResponse *, uint32_t *);
    TRITONSERVER_Error *(*Output)(TRITONSERVER_InferenceResponse *, const uint32_t, const char **,
                                  TRITONSERVER_DataType *, const int64_t **, uint64_t *,
                                  const void **, size_t *, TRITONSERVER_MemoryType *, int64_t *,
                                  void **);
    /* One allocator for the process, never deleted: a response the caller keeps (and deletes
     * whenever it likes) points at it, so it must outlive every lane. */
    TRITONSERVER_ResponseAllocator *allocator;
} T;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;

static void copy_msg(char *out, size_t n, const char *msg)
{
    if (out && n) {
        snprintf(out, n, "%s", msg ? msg : "");
    }
}

/* ------------------------------------------------------------------ lane data */

enum { MODE_IDLE = 0, MODE_CLOSED = 1, MODE_OPEN = 2 };

#define MAX_DIMS 16
#define LAT_CAP_MAX ((size_t)1 << 24) /* entries per undrained buffer (128 MiB); beyond: dropped */

/* Samples recorded by the core's threads, handed to the drainer: two arrays, one filled while
 * the other is read (the drainer's until its next drain). */
typedef struct fp_buf {
    int64_t *v[2];
    size_t cap[2];
    size_t len;
} fp_buf;

enum { BUF_LAT = 0, BUF_FIRST = 1, BUF_GAP = 2, BUF_COUNT = 3, N_BUFS = 4 };

typedef struct fp_input {
    char *name;
    TRITONSERVER_DataType dtype;
    int64_t shape[MAX_DIMS];
    uint64_t ndim;
    void *data;
    size_t size;
} fp_input;

struct fp_lane;

#define MSG_TOP 8
#define MSG_LEN 256

/* What a round's end records (fp_slot.rec). */
enum { REC_NONE, REC_LATENCY, REC_STREAM, REC_FAILED };

typedef struct fp_slot {
    struct fp_lane *lane;
    TRITONSERVER_InferenceRequest *req; /* NULL: (re)built before its next submission */
    int entry;                          /* the entry whose inputs req carries */
    int64_t t0;                         /* latency origin: submit time, or scheduled send time */
    atomic_llong t_sub;                 /* when this round entered the core: its timeout's origin */
    /* Round r is 2r+1 until its outcome is counted, then 2r+2. The final response and the
     * timeout scan race to make it even: whoever does counts the round, exactly once, and the
     * round number keeps a scan from settling a later round than the one it read. */
    atomic_ullong token;
    atomic_int pending;                 /* events left in this round: final response + release */
    int failed;                         /* an error response arrived in this round */
    int bad;                            /* a successful response had a wrong output */
    unsigned n_data;                    /* successful responses (with data) in this round: none and
                                         * no error is a request answered by the final flag alone */
    int64_t t_first;                    /* when the first of them came */
    int64_t t_prev;                     /* when the latest of them came */
    char *error;                        /* the round's first error message, counted when settled */
    /* What the round's end records, once both its events have happened (REC_*): its latency
     * counts to the later of the final response and the request's release, the moment the core
     * is done with it, so that the server's own request time (which ends when the backend has
     * reported the request's statistics, just before it releases it) never exceeds it. */
    int rec;
    int64_t rec_first;                  /* a stream's first data response (absolute ns) */
    int64_t rec_count;                  /* a stream's data responses */
    struct fp_slot *next_free;
    struct fp_slot *next_all;
} fp_slot;

typedef struct fp_lane {
    TRITONSERVER_Server *server;
    char *model;
    int64_t version;
    /* The inputs of every entry, entry after entry: entry e is inputs[entry_start[e]] up to
     * inputs[entry_start[e + 1]]. Request k of the lane carries entry k mod n_entries. */
    fp_input *inputs;
    int n_inputs;
    int *entry_start;
    int n_entries;
    atomic_ullong next_entry; /* requests handed an entry so far (only with n_entries > 1) */
    int keep_last;

    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    fp_slot *all;
    fp_slot *free_list;
    int n_slots;
    int n_free;
    int in_flight; /* slots owned by the core (under mu) */
    int max_slots;

    int mode;
    atomic_int running; /* issuing allowed */
    pthread_t thread;
    int thread_started;
    atomic_int issuing_done;
    int64_t *sched;
    size_t n_sched;
    atomic_ullong issued;

    /* Under lat_mu: latencies (negated for failed requests); for streaming requests the time
     * to the first data response, the gaps between data responses, and the data responses per
     * answered request. All four swap at once in fp_lane_drain. */
    pthread_mutex_t lat_mu;
    fp_buf bufs[N_BUFS];
    int lat_cur;
    atomic_int streaming; /* record first responses, gaps and counts (see the top) */

    atomic_ullong submitted, completed, errors, out_bytes, dropped, bad_outputs, timeouts;
    /* Requests between ServerInferAsync and their release callback: what the server holds. */
    atomic_int in_server;
    atomic_int peak_in_server;
    atomic_llong timeout_ns; /* 0: none (fp_lane_set_timeout) */
    int64_t next_scan;       /* under mu: the timeout scan runs at most every SCAN_NS */
    /* The output check (fp_lane_set_check): one output by name, its byte size, and its bytes
     * where they are known (a deterministic model with a fixed input: a memcmp is enough). */
    char *check_name;
    size_t check_size;  /* SIZE_MAX: not fixed */
    void *check_bytes;
    int check_datatype; /* TRITONSERVER_DataType, or -1: any */
    int check_rank;     /* -1: any */
    int64_t check_dims[16]; /* -1: this dimension varies */
    atomic_int has_error;
    char first_error[1024];
    /* The most frequent error messages: the first MSG_TOP distinct ones, each with its count
     * (later distinct ones count in msg_other). */
    pthread_mutex_t msg_mu;
    struct { char text[MSG_LEN]; unsigned long long count; } msgs[MSG_TOP];
    int n_msgs;
    unsigned long long msg_other;

    _Atomic(TRITONSERVER_InferenceResponse *) last_response;

    int efd;
    atomic_int signaled;
} fp_lane;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t fp_now_ns(void) { return now_ns(); }

static void count_message(fp_lane *lane, const char *msg)
{
    pthread_mutex_lock(&lane->msg_mu);
    int i = 0;
    while (i < lane->n_msgs && strncmp(lane->msgs[i].text, msg, MSG_LEN - 1) != 0) i++;
    if (i < lane->n_msgs) {
        lane->msgs[i].count++;
    } else if (lane->n_msgs < MSG_TOP) {
        copy_msg(lane->msgs[i].text, MSG_LEN, msg);
        lane->msgs[i].count = 1;
        lane->n_msgs++;
    } else {
        lane->msg_other++;
    }
    pthread_mutex_unlock(&lane->msg_mu);
}

static void record_error(fp_lane *lane, const char *msg)
{
    atomic_fetch_add(&lane->errors, 1);
    count_message(lane, msg);
    int expected = 0;
    if (atomic_compare_exchange_strong(&lane->has_error, &expected, 1)) {
        copy_msg(lane->first_error, sizeof lane->first_error, msg);
        atomic_store(&lane->has_error, 2); /* message readable */
    }
}

static void record_triton_error(fp_lane *lane, const char *what, TRITONSERVER_Error *err)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s: %s", what, T.ErrorMessage(err));
    T.ErrorDelete(err);
    record_error(lane, buf);
}

static void wake(fp_lane *lane)
{
    if (!atomic_exchange(&lane->signaled, 1)) {
        uint64_t one = 1;
        ssize_t r = write(lane->efd, &one, sizeof one);
        (void)r; /* EAGAIN only when the counter is saturated: already readable */
    }
}

/* Append v to buffer b (under lat_mu); a sample that does not fit counts as dropped. */
static void push_locked(fp_lane *lane, int b, int64_t v)
{
    fp_buf *buf = &lane->bufs[b];
    int c = lane->lat_cur;
    if (buf->len == buf->cap[c]) {
        size_t cap = buf->cap[c] ? buf->cap[c] * 2 : 4096;
        int64_t *p = cap <= LAT_CAP_MAX ? realloc(buf->v[c], cap * sizeof(int64_t)) : NULL;
        if (!p) {
            atomic_fetch_add(&lane->dropped, 1);
            return;
        }
        buf->v[c] = p;
        buf->cap[c] = cap;
    }
    buf->v[c][buf->len++] = v;
}

static void record_latency(fp_lane *lane, int64_t ns)
{
    pthread_mutex_lock(&lane->lat_mu);
    push_locked(lane, BUF_LAT, ns);
    pthread_mutex_unlock(&lane->lat_mu);
}

/* A streaming request answered: its latency, time to first data response, and data responses,
 * under one lock (a window holds all three of a request, or none). */
static void record_answered_stream(fp_lane *lane, int64_t latency, int64_t first, int64_t count)
{
    pthread_mutex_lock(&lane->lat_mu);
    push_locked(lane, BUF_LAT, latency);
    push_locked(lane, BUF_FIRST, first);
    push_locked(lane, BUF_COUNT, count);
    pthread_mutex_unlock(&lane->lat_mu);
}

static void record_gap(fp_lane *lane, int64_t ns)
{
    pthread_mutex_lock(&lane->lat_mu);
    push_locked(lane, BUF_GAP, ns);
    pthread_mutex_unlock(&lane->lat_mu);
}

/* ------------------------------------------------------------------ allocator */

static TRITONSERVER_Error *alloc_fn(TRITONSERVER_ResponseAllocator *a, const char *name,
                                    size_t size, TRITONSERVER_MemoryType mt, int64_t mid,
                                    void *userp, void **buffer, void **buffer_userp,
                                    TRITONSERVER_MemoryType *amt, int64_t *amid)
{
    (void)a; (void)name; (void)mt; (void)mid;
    *buffer = size ? malloc(size) : NULL;
    *buffer_userp = NULL;
    *amt = TRITONSERVER_MEMORY_CPU;
    *amid = 0;
    fp_slot *slot = userp;
    if (slot) {
        atomic_fetch_add(&slot->lane->out_bytes, size);
    }
    /* malloc failing is left to the core: it reports a missing buffer as a response error */
    return NULL;
}

static TRITONSERVER_Error *release_fn(TRITONSERVER_ResponseAllocator *a, void *buffer,
                                      void *buffer_userp, size_t size, TRITONSERVER_MemoryType mt,
                                      int64_t mid)
{
    (void)a; (void)buffer_userp; (void)size; (void)mt; (void)mid;
    free(buffer);
    return NULL;
}

/* ------------------------------------------------------------------ init */

#define LOOK(field, symbol)                                                             \
    do {                                                                                \
        *(void **)(&T.field) = dlsym(h, symbol);                                        \
        if (!T.field) {                                                                 \
            snprintf(err, errlen, "the Triton core lacks %s", symbol);                  \
            goto fail;                                                                  \
        }                                                                               \
    } while (0)

/* Bind to the core already loaded in this process. Returns 0 or -1 with a message. */
int fp_init(const char *core_path, char *err, size_t errlen)
{
    pthread_mutex_lock(&init_mu);
    if (T.ready) {
        pthread_mutex_unlock(&init_mu);
        return 0;
    }
    void *h = NULL;
    if (core_path && *core_path) {
        h = dlopen(core_path, RTLD_NOLOAD | RTLD_NOW);
        if (!h) {
            snprintf(err, errlen, "the Triton core %s is not loaded in this process (%s)",
                     core_path, dlerror());
            goto fail;
        }
    } else {
        h = RTLD_DEFAULT;
    }
    LOOK(ErrorDelete, "TRITONSERVER_ErrorDelete");
    LOOK(ErrorMessage, "TRITONSERVER_ErrorMessage");
    LOOK(ResponseAllocatorNew, "TRITONSERVER_ResponseAllocatorNew");
    LOOK(RequestNew, "TRITONSERVER_InferenceRequestNew");
    LOOK(RequestDelete, "TRITONSERVER_InferenceRequestDelete");
    LOOK(RemoveAllInputs, "TRITONSERVER_InferenceRequestRemoveAllInputs");
    LOOK(AddInput, "TRITONSERVER_InferenceRequestAddInput");
    LOOK(AppendInputData, "TRITONSERVER_InferenceRequestAppendInputData");
    LOOK(SetReleaseCallback, "TRITONSERVER_InferenceRequestSetReleaseCallback");
    LOOK(SetResponseCallback, "TRITONSERVER_InferenceRequestSetResponseCallback");
    LOOK(InferAsync, "TRITONSERVER_ServerInferAsync");
    LOOK(ResponseError, "TRITONSERVER_InferenceResponseError");
    LOOK(ResponseDelete, "TRITONSERVER_InferenceResponseDelete");
    LOOK(OutputCount, "TRITONSERVER_InferenceResponseOutputCount");
    LOOK(Output, "TRITONSERVER_InferenceResponseOutput");
    TRITONSERVER_Error *e = T.ResponseAllocatorNew(&T.allocator, alloc_fn, release_fn, NULL);
    if (e) {
        snprintf(err, errlen, "TRITONSERVER_ResponseAllocatorNew: %s", T.ErrorMessage(e));
        T.ErrorDelete(e);
        goto fail;
    }
    T.ready = 1;
    pthread_mutex_unlock(&init_mu);
    return 0;
fail:
    pthread_mutex_unlock(&init_mu);
    return -1;
}

/* ------------------------------------------------------------------ requests */

static void on_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp);
static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp);

/* Add entry `entry`'s inputs to `req` (which has none). NULL or the core's error. */
static TRITONSERVER_Error *add_entry(fp_lane *lane, TRITONSERVER_InferenceRequest *req, int entry)
{
    TRITONSERVER_Error *e = NULL;
    for (int i = lane->entry_start[entry]; i < lane->entry_start[entry + 1] && !e; i++) {
        fp_input *in = &lane->inputs[i];
        e = T.AddInput(req, in->name, in->dtype, in->shape, in->ndim);
        if (!e) {
            e = T.AppendInputData(req, in->name, in->data, in->size, TRITONSERVER_MEMORY_CPU, 0);
        }
    }
    return e;
}

/* Build the slot's request object over entry `entry`; 0 or -1 (error recorded). */
static int slot_build(fp_slot *slot, int entry)
{
    fp_lane *lane = slot->lane;
    TRITONSERVER_InferenceRequest *req = NULL;
    TRITONSERVER_Error *e = T.RequestNew(&req, lane->server, lane->model, lane->version);
    if (e) {
        record_triton_error(lane, "InferenceRequestNew", e);
        return -1;
    }
    e = add_entry(lane, req, entry);
    slot->entry = entry;
    if (!e) e = T.SetReleaseCallback(req, on_release, slot);
    if (!e) e = T.SetResponseCallback(req, T.allocator, slot, on_response, slot);
    if (e) {
        record_triton_error(lane, "building the request", e);
        T.RequestDelete(req);
        return -1;
    }
    slot->req = req;
    return 0;
}

static void slot_drop_request(fp_slot *slot)
{
    if (slot->req) {
        TRITONSERVER_Error *e = T.RequestDelete(slot->req);
        if (e) T.ErrorDelete(e);
        slot->req = NULL;
    }
}

/* Make the slot's request (ours: between rounds) carry entry `entry`: its inputs replaced, the
 * rest of it (callbacks, model) kept. Only lanes of several entries come here; an entry may
 * differ from the last in shape, so the inputs are added again, not only their data. A request
 * that cannot be changed is dropped (and rebuilt on its next try). 0 or -1 (error recorded). */
static int slot_set_entry(fp_slot *slot, int entry)
{
    fp_lane *lane = slot->lane;
    if (!slot->req) return slot_build(slot, entry);
    if (slot->entry == entry) return 0;
    TRITONSERVER_Error *e = T.RemoveAllInputs(slot->req);
    if (!e) e = add_entry(lane, slot->req, entry);
    if (e) {
        record_triton_error(lane, "changing the request's inputs", e);
        slot_drop_request(slot);
        return -1;
    }
    slot->entry = entry;
    return 0;
}

/* Claim the right to count round `token` of the slot: 1 for exactly one caller per round. */
static int slot_settle(fp_slot *slot, unsigned long long token)
{
    return (token & 1) && atomic_compare_exchange_strong(&slot->token, &token, token + 1);
}

/* Hand the slot's request to the core. t0 < 0: latency counts from now. 1 = submitted. */
static int slot_submit(fp_slot *slot, int64_t t0)
{
    fp_lane *lane = slot->lane;
    if (lane->n_entries > 1) {
        /* several entries: this request takes the next in turn (one lane, one sequence) */
        int entry = (int)(atomic_fetch_add_explicit(&lane->next_entry, 1, memory_order_relaxed)
                          % (unsigned long long)lane->n_entries);
        if (slot_set_entry(slot, entry) != 0) return 0;
    } else if (!slot->req && slot_build(slot, 0) != 0) {
        return 0;
    }
    slot->failed = 0;
    slot->bad = 0;
    slot->n_data = 0;
    slot->rec = REC_NONE;
    atomic_store(&slot->pending, 2);
    /* set before the call: the callbacks may run before ServerInferAsync returns */
    int64_t now = now_ns();
    slot->t0 = t0 >= 0 ? t0 : now;
    atomic_store_explicit(&slot->t_sub, now, memory_order_relaxed);
    /* the slot is ours, so its token is settled (even): this round's is the next odd one; the
     * release orders t_sub before it for the scan */
    unsigned long long token = atomic_load_explicit(&slot->token, memory_order_relaxed) + 1;
    atomic_store_explicit(&slot->token, token, memory_order_release);
    int n = atomic_fetch_add(&lane->in_server, 1) + 1;
    int peak = atomic_load_explicit(&lane->peak_in_server, memory_order_relaxed);
    while (n > peak && !atomic_compare_exchange_weak(&lane->peak_in_server, &peak, n)) {
    }
    TRITONSERVER_Error *e = T.InferAsync(lane->server, slot->req, NULL);
    if (e) {
        atomic_fetch_sub(&lane->in_server, 1);
        if (slot_settle(slot, token)) {
            record_triton_error(lane, "ServerInferAsync", e);
        } else {
            T.ErrorDelete(e); /* a refusal slower than the timeout: already counted as one */
        }
        /* still ours; rebuild it before reuse, its state after a refusal is the core's business */
        slot_drop_request(slot);
        return 0;
    }
    atomic_fetch_add(&lane->submitted, 1);
    return 1;
}

static void push_free_locked(fp_lane *lane, fp_slot *slot)
{
    slot->next_free = lane->free_list;
    lane->free_list = slot;
    lane->n_free++;
}

static fp_slot *pop_free_locked(fp_lane *lane)
{
    fp_slot *s = lane->free_list;
    if (s) {
        lane->free_list = s->next_free;
        lane->n_free--;
    }
    return s;
}

/* The round's figures, at its end t (both events seen): see fp_slot.rec. */
static void slot_record(fp_slot *slot, int64_t t)
{
    fp_lane *lane = slot->lane;
    int64_t lat = t - slot->t0;
    switch (slot->rec) {
    case REC_LATENCY: record_latency(lane, lat); break;
    case REC_STREAM: record_answered_stream(lane, lat, slot->rec_first - slot->t0, slot->rec_count); break;
    case REC_FAILED: record_latency(lane, -(lat > 0 ? lat : 1)); break; /* negated: failed */
    default: return;
    }
    slot->rec = REC_NONE;
    wake(lane);
}

/* Both events of a round have happened: the request is ours again. After the unlock the
 * lane may be freed by close(): touch nothing of it after that. */
static void slot_finished(fp_slot *slot)
{
    fp_lane *lane = slot->lane;
    if (lane->mode == MODE_CLOSED && atomic_load(&lane->running)) {
        if (slot_submit(slot, -1)) {
            return;
        }
    }
    pthread_mutex_lock(&lane->mu);
    lane->in_flight--;
    push_free_locked(lane, slot);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
}

static void slot_event(fp_slot *slot)
{
    if (atomic_fetch_sub(&slot->pending, 1) == 1) {
        slot_record(slot, now_ns());
        slot_finished(slot);
    }
}

/* 1 when the response's checked output is what it must be (or nothing is checked). */
static int output_ok(fp_lane *lane, TRITONSERVER_InferenceResponse *resp)
{
    if (!lane->check_name) return 1;
    uint32_t count = 0;
    TRITONSERVER_Error *e = T.OutputCount(resp, &count);
    if (e) {
        T.ErrorDelete(e);
        return 0;
    }
    for (uint32_t i = 0; i < count; i++) {
        const char *name;
        TRITONSERVER_DataType dt;
        const int64_t *shape;
        uint64_t dims;
        const void *base;
        size_t size;
        TRITONSERVER_MemoryType mt;
        int64_t mid;
        void *up;
        e = T.Output(resp, i, &name, &dt, &shape, &dims, &base, &size, &mt, &mid, &up);
        if (e) {
            T.ErrorDelete(e);
            return 0;
        }
        if (strcmp(name, lane->check_name) != 0) continue;
        if (lane->check_datatype >= 0 && (int)dt != lane->check_datatype) return 0;
        if (lane->check_rank >= 0) {
            if (dims != (uint64_t)lane->check_rank) return 0;
            for (int d = 0; d < lane->check_rank; d++)
                if (lane->check_dims[d] >= 0 && shape[d] != lane->check_dims[d]) return 0;
        }
        if (lane->check_size != SIZE_MAX && size != lane->check_size) return 0;
        return !lane->check_bytes || (base && memcmp(base, lane->check_bytes, size) == 0);
    }
    return 0; /* the output is missing */
}

/* A data response of the slot's round came at t: the first one's time is kept, and each later
 * one's gap from the one before is recorded (unless the round already timed out: a request
 * counted as a timeout counts nothing more). */
static void note_data(fp_slot *slot, int64_t t)
{
    if (slot->n_data++ == 0) {
        slot->t_first = t;
    } else if (atomic_load_explicit(&slot->token, memory_order_relaxed) & 1) {
        record_gap(slot->lane, t - slot->t_prev);
    }
    slot->t_prev = t;
}

static void set_streaming(fp_lane *lane)
{
    if (!atomic_load_explicit(&lane->streaming, memory_order_relaxed)) {
        atomic_store(&lane->streaming, 1);
    }
}

static void on_response(TRITONSERVER_InferenceResponse *resp, const uint32_t flags, void *userp)
{
    fp_slot *slot = userp;
    fp_lane *lane = slot->lane;
    int data = 0; /* this call brought a successful response */
    if (resp) {
        TRITONSERVER_Error *e = T.ResponseError(resp); /* a new error object: ours to delete */
        if (e) {
            /* counted at the final response, and only if the round has not timed out */
            if (!slot->error) {
                char buf[1024];
                snprintf(buf, sizeof buf, "response: %s", T.ErrorMessage(e));
                slot->error = strdup(buf);
            }
            T.ErrorDelete(e);
            slot->failed = 1;
            e = T.ResponseDelete(resp);
            if (e) T.ErrorDelete(e);
        } else {
            data = 1;
            if (!output_ok(lane, resp)) slot->bad = 1;
            TRITONSERVER_InferenceResponse *old = resp;
            if (lane->keep_last) {
                old = atomic_exchange(&lane->last_response, resp);
            }
            if (old) {
                e = T.ResponseDelete(old);
                if (e) T.ErrorDelete(e);
            }
        }
    }
    if (!(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)) {
        /* a response before the final flag: the model streams */
        if (data) {
            set_streaming(lane);
            note_data(slot, now_ns());
        }
        return;
    }
    {
        int64_t t = now_ns();
        if (data) {
            note_data(slot, t); /* the last data response came with the final flag */
        } else if (!resp) {
            set_streaming(lane); /* the final flag alone: a decoupled model's way to end */
        }
        /* the round cannot move on before this event, so the token read is this round's */
        if (slot_settle(slot, atomic_load(&slot->token))) {
            if (slot->bad) atomic_fetch_add(&lane->bad_outputs, 1);
            if (!slot->failed) {
                /* answered: by data responses, or by the final flag alone (none carried data) */
                if (atomic_load_explicit(&lane->streaming, memory_order_relaxed)) {
                    slot->rec = REC_STREAM;
                    slot->rec_first = slot->n_data ? slot->t_first : t;
                    slot->rec_count = (int64_t)slot->n_data;
                } else {
                    slot->rec = REC_LATENCY;
                }
                atomic_fetch_add(&lane->completed, 1);
            } else {
                record_error(lane, slot->error ? slot->error
                                               : "response: an error (its message lost: out of memory)");
                slot->rec = REC_FAILED;
            }
        }
        free(slot->error);
        slot->error = NULL;
        wake(lane);
        slot_event(slot);
    }
}

static void on_release(TRITONSERVER_InferenceRequest *req, const uint32_t flags, void *userp)
{
    (void)req;
    if (flags & TRITONSERVER_REQUEST_RELEASE_ALL) {
        fp_slot *slot = userp;
        atomic_fetch_sub(&slot->lane->in_server, 1);
        slot_event(slot);
    }
}

/* ------------------------------------------------------------------ request timeouts */

#define SCAN_NS 5000000LL /* a timeout is noticed this late at most (its latency is exact) */

/* Count, once, each request whose final response has not come within the lane's timeout of
 * its submission: an error, a timeout and a latency of minus the timeout. The request stays the
 * core's: its slot comes back when (if ever) its response and release do. Under mu (the slot
 * list); at most one walk of the slots every SCAN_NS, so callers need not pace themselves. */
static void scan_timeouts_locked(fp_lane *lane)
{
    int64_t limit = atomic_load(&lane->timeout_ns);
    if (limit <= 0) return;
    int64_t now = now_ns();
    if (now < lane->next_scan) return;
    lane->next_scan = now + SCAN_NS;
    int found = 0;
    for (fp_slot *s = lane->all; s; s = s->next_all) {
        unsigned long long token = atomic_load_explicit(&s->token, memory_order_acquire);
        if (!(token & 1)) continue;
        if (now - atomic_load_explicit(&s->t_sub, memory_order_relaxed) <= limit) continue;
        if (!slot_settle(s, token)) continue; /* its response won, or it is a later round */
        char buf[128];
        snprintf(buf, sizeof buf, "no response within %g s (request timeout)", (double)limit / 1e9);
        atomic_fetch_add(&lane->timeouts, 1);
        record_error(lane, buf);
        record_latency(lane, -limit);
        found = 1;
    }
    if (found) wake(lane);
}

static void scan_timeouts(fp_lane *lane)
{
    if (atomic_load(&lane->timeout_ns) <= 0) return;
    pthread_mutex_lock(&lane->mu);
    scan_timeouts_locked(lane);
    pthread_mutex_unlock(&lane->mu);
}

/* Wait on the lane's cv, no longer than the next timeout scan is due where there are timeouts. */
static void wait_locked(fp_lane *lane)
{
    if (atomic_load(&lane->timeout_ns) <= 0) {
        pthread_cond_wait(&lane->cv, &lane->mu);
        return;
    }
    int64_t t = now_ns() + SCAN_NS;
    struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
    pthread_cond_timedwait(&lane->cv, &lane->mu, &ts);
}

/* ------------------------------------------------------------------ lane threads */

/* Sleep until `until` (CLOCK_MONOTONIC ns), waking early when the lane stops. 0 = stopped. */
static int sleep_until(fp_lane *lane, int64_t until)
{
    for (;;) {
        if (!atomic_load(&lane->running)) return 0;
        int64_t left = until - now_ns();
        if (left <= 0) return 1;
        /* long waits scan at each step; a send after a short one scans in open_main, under
         * the lock it takes anyway (no extra lock per request) */
        if (left > 5000000) scan_timeouts(lane);
        int64_t step = left > 5000000 ? 5000000 : left; /* stop() waits at most 5 ms for us */
        int64_t t = now_ns() + step;
        struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
    }
}

static fp_slot *new_slot_locked(fp_lane *lane)
{
    fp_slot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->lane = lane;
    s->next_all = lane->all;
    lane->all = s;
    lane->n_slots++;
    return s;
}

/* Closed loop: the core's threads re-submit; this thread only (re)starts idle slots: all of
 * them at start, and any whose submission failed, after a backoff (1 ms doubling to 100 ms),
 * and counts the requests that time out. */
static void *closed_main(void *arg)
{
    fp_lane *lane = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    int64_t backoff = 0;
    pthread_mutex_lock(&lane->mu);
    while (atomic_load(&lane->running)) {
        scan_timeouts_locked(lane);
        if (!lane->free_list) {
            wait_locked(lane);
            continue;
        }
        if (backoff) {
            pthread_mutex_unlock(&lane->mu);
            sleep_until(lane, now_ns() + backoff);
            pthread_mutex_lock(&lane->mu);
        }
        int failed = 0;
        fp_slot *s;
        while (atomic_load(&lane->running) && (s = pop_free_locked(lane))) {
            lane->in_flight++;
            pthread_mutex_unlock(&lane->mu);
            int ok = slot_submit(s, -1);
            pthread_mutex_lock(&lane->mu);
            if (!ok) {
                lane->in_flight--;
                push_free_locked(lane, s);
                failed = 1;
                break;
            }
        }
        if (failed) {
            backoff = backoff ? (backoff * 2 > 100000000 ? 100000000 : backoff * 2) : 1000000;
        } else {
            backoff = 0;
        }
    }
    pthread_mutex_unlock(&lane->mu);
    atomic_store(&lane->issuing_done, 1);
    return NULL;
}

/* Open loop: send at each scheduled time, on whatever slot is free (a new one if none is,
 * up to max_slots, then wait for one: latency still counts from the schedule). */
static void *open_main(void *arg)
{
    fp_lane *lane = arg;
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (size_t i = 0; i < lane->n_sched; i++) {
        int64_t t = lane->sched[i];
        if (!sleep_until(lane, t)) break;
        pthread_mutex_lock(&lane->mu);
        scan_timeouts_locked(lane);
        fp_slot *s = pop_free_locked(lane);
        if (!s && lane->n_slots < lane->max_slots) {
            s = new_slot_locked(lane);
        }
        while (!s && atomic_load(&lane->running)) {
            scan_timeouts_locked(lane);
            wait_locked(lane);
            s = pop_free_locked(lane);
        }
        if (!s) {
            pthread_mutex_unlock(&lane->mu);
            break;
        }
        lane->in_flight++;
        pthread_mutex_unlock(&lane->mu);
        int ok = slot_submit(s, t);
        atomic_fetch_add(&lane->issued, 1);
        if (!ok) {
            wake(lane);
            pthread_mutex_lock(&lane->mu);
            lane->in_flight--;
            push_free_locked(lane, s);
            pthread_mutex_unlock(&lane->mu);
        }
    }
    atomic_store(&lane->issuing_done, 1);
    wake(lane);
    /* the requests still out may yet time out: keep counting them until they are back */
    pthread_mutex_lock(&lane->mu);
    while (atomic_load(&lane->running) && lane->in_flight > 0 && atomic_load(&lane->timeout_ns) > 0) {
        scan_timeouts_locked(lane);
        wait_locked(lane);
    }
    pthread_mutex_unlock(&lane->mu);
    return NULL;
}

/* ------------------------------------------------------------------ public functions */

int fp_lane_free(fp_lane *lane);

/* n_entries entries of inputs, entry e having counts[e] of them, one after the other in the
 * arrays: names (n_inputs strings in all), shapes (n_inputs * MAX_DIMS int64; row i holds
 * ndims[i] dims), dtypes, datas, sizes. Request k of the lane carries entry k mod n_entries. */
fp_lane *fp_lane_new(void *server, const char *model, int64_t version, int n_entries,
                     const int *counts, const char **names, const int *dtypes, const int64_t *shapes,
                     const uint64_t *ndims, const void **datas, const size_t *sizes,
                     int in_flight, int keep_last, char *err, size_t errlen)
{
    if (!T.ready) {
        copy_msg(err, errlen, "fp_init was not called");
        return NULL;
    }
    if (in_flight < 1) {
        copy_msg(err, errlen, "in_flight must be >= 1");
        return NULL;
    }
    if (n_entries < 1) {
        copy_msg(err, errlen, "a lane needs at least one entry of inputs");
        return NULL;
    }
    int n_inputs = 0;
    for (int e = 0; e < n_entries; e++) {
        if (counts[e] < 0) {
            copy_msg(err, errlen, "an entry's input count is negative");
            return NULL;
        }
        n_inputs += counts[e];
    }
    fp_lane *lane = calloc(1, sizeof *lane);
    if (!lane) {
        copy_msg(err, errlen, "out of memory");
        return NULL;
    }
    lane->server = server;
    lane->version = version;
    lane->keep_last = keep_last;
    lane->max_slots = in_flight;
    lane->efd = -1;
    pthread_mutex_init(&lane->mu, NULL);
    pthread_mutex_init(&lane->lat_mu, NULL);
    pthread_mutex_init(&lane->msg_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&lane->cv, &ca);
    pthread_condattr_destroy(&ca);
    lane->model = strdup(model);
    lane->inputs = calloc(n_inputs > 0 ? n_inputs : 1, sizeof(fp_input));
    lane->entry_start = calloc((size_t)n_entries + 1, sizeof(int));
    lane->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (!lane->model || !lane->inputs || !lane->entry_start || lane->efd < 0) {
        copy_msg(err, errlen, lane->efd < 0 ? "eventfd failed" : "out of memory");
        goto fail;
    }
    for (int e = 0; e < n_entries; e++) {
        lane->entry_start[e + 1] = lane->entry_start[e] + counts[e];
    }
    lane->n_entries = n_entries;
    for (int i = 0; i < n_inputs; i++) {
        fp_input *in = &lane->inputs[i];
        lane->n_inputs = i + 1;
        if (ndims[i] > MAX_DIMS) {
            snprintf(err, errlen, "input %s has more than %d dimensions", names[i], MAX_DIMS);
            goto fail;
        }
        in->name = strdup(names[i]);
        in->dtype = dtypes[i];
        in->ndim = ndims[i];
        memcpy(in->shape, shapes + (size_t)i * MAX_DIMS, sizeof(int64_t) * ndims[i]);
        in->size = sizes[i];
        in->data = malloc(sizes[i] ? sizes[i] : 1);
        if (!in->name || !in->data) {
            copy_msg(err, errlen, "out of memory");
            goto fail;
        }
        if (sizes[i]) memcpy(in->data, datas[i], sizes[i]);
    }
    pthread_mutex_lock(&lane->mu);
    for (int i = 0; i < in_flight; i++) {
        fp_slot *s = new_slot_locked(lane);
        if (!s) {
            pthread_mutex_unlock(&lane->mu);
            copy_msg(err, errlen, "out of memory");
            goto fail;
        }
        push_free_locked(lane, s);
    }
    pthread_mutex_unlock(&lane->mu);
    /* Build the requests now, so a wrong model or input fails here, loudly; and every entry
     * once (then dropped), so a wrong input of any entry does too. */
    for (fp_slot *s = lane->all; s; s = s->next_all) {
        if (slot_build(s, 0) != 0) {
            copy_msg(err, errlen, lane->first_error);
            goto fail;
        }
    }
    for (int e = 1; e < n_entries; e++) {
        if (slot_set_entry(lane->all, e) != 0) {
            copy_msg(err, errlen, lane->first_error);
            goto fail;
        }
    }
    return lane;
fail:
    (void)fp_lane_free(lane);
    return NULL;
}

static int start_thread(fp_lane *lane, int mode, void *(*fn)(void *))
{
    if (lane->thread_started || lane->in_flight) return -1;
    lane->mode = mode;
    atomic_store(&lane->issuing_done, 0);
    atomic_store(&lane->running, 1);
    if (pthread_create(&lane->thread, NULL, fn, lane) != 0) {
        atomic_store(&lane->running, 0);
        lane->mode = MODE_IDLE;
        return -2;
    }
    lane->thread_started = 1;
    return 0;
}

/* 0 ok; -1 already running; -2 no thread. */
int fp_lane_start_closed(fp_lane *lane)
{
    return start_thread(lane, MODE_CLOSED, closed_main);
}

int fp_lane_start_open(fp_lane *lane, const int64_t *times, size_t n, int max_slots)
{
    if (lane->thread_started || lane->in_flight) return -1;
    free(lane->sched);
    lane->sched = malloc((n ? n : 1) * sizeof(int64_t));
    if (!lane->sched) return -2;
    memcpy(lane->sched, times, n * sizeof(int64_t));
    lane->n_sched = n;
    atomic_store(&lane->issued, 0);
    pthread_mutex_lock(&lane->mu);
    lane->max_slots = max_slots > lane->n_slots ? max_slots : lane->n_slots;
    pthread_mutex_unlock(&lane->mu);
    return start_thread(lane, MODE_OPEN, open_main);
}

/* Stop issuing; wait up to timeout_ns for every request to come back. 1 = nothing in flight.
 * Then drop the request objects: each holds its model, and a stopped lane must not keep a
 * model loaded (the next start rebuilds them). */
int fp_lane_stop(fp_lane *lane, int64_t timeout_ns)
{
    atomic_store(&lane->running, 0);
    pthread_mutex_lock(&lane->mu);
    pthread_cond_broadcast(&lane->cv);
    pthread_mutex_unlock(&lane->mu);
    if (lane->thread_started) {
        pthread_join(lane->thread, NULL);
        lane->thread_started = 0;
    }
    int64_t deadline = now_ns() + (timeout_ns > 0 ? timeout_ns : 0);
    pthread_mutex_lock(&lane->mu);
    while (lane->in_flight > 0) {
        scan_timeouts_locked(lane); /* the lane's thread is gone: timeouts are counted here */
        int64_t now = now_ns();
        if (now >= deadline) break;
        int64_t until = deadline;
        if (atomic_load(&lane->timeout_ns) > 0 && now + SCAN_NS < until) until = now + SCAN_NS;
        struct timespec ts = {until / 1000000000LL, until % 1000000000LL};
        pthread_cond_timedwait(&lane->cv, &lane->mu, &ts);
    }
    int idle = lane->in_flight == 0;
    if (idle) {
        lane->mode = MODE_IDLE;
        for (fp_slot *s = lane->all; s; s = s->next_all) slot_drop_request(s);
    }
    pthread_mutex_unlock(&lane->mu);
    return idle;
}

/* Hand over what was recorded since the last drain, N_BUFS arrays: out[i] points at buffer i's
 * samples (valid until the next drain), n[i] their count: latencies, first responses, gaps,
 * responses per request (the last three of streaming requests only). One drainer at a time.
 * Clears the eventfd. */
void fp_lane_drain(fp_lane *lane, int64_t **out, size_t *n)
{
    uint64_t v;
    scan_timeouts(lane); /* no thread scans a stopped lane, or one past its schedule */
    atomic_store(&lane->signaled, 0);
    while (read(lane->efd, &v, sizeof v) == sizeof v) {
    }
    pthread_mutex_lock(&lane->lat_mu);
    int c = lane->lat_cur;
    for (int b = 0; b < N_BUFS; b++) {
        out[b] = lane->bufs[b].v[c];
        n[b] = lane->bufs[b].len;
        lane->bufs[b].len = 0;
    }
    lane->lat_cur = 1 - c;
    pthread_mutex_unlock(&lane->lat_mu);
}

/* Record first responses, gaps and responses per request from now on (a decoupled model), or
 * not (until a response shows the model streams). */
void fp_lane_set_streaming(fp_lane *lane, int on)
{
    atomic_store(&lane->streaming, on ? 1 : 0);
}

/* Check every response's output `name`: byte size `size`, and its bytes when `bytes` is not
 * NULL. Call before starting the lane. 0 ok, -1 out of memory. */
/* Hold every response's output `name` to a datatype (-1: any), a shape (rank -1: any; a dim of
 * -1 varies), a byte size (SIZE_MAX: not fixed) and, where given, its exact bytes. */
int fp_lane_set_check(fp_lane *lane, const char *name, size_t size, const void *bytes,
                      int datatype, int rank, const int64_t *dims)
{
    free(lane->check_name);
    free(lane->check_bytes);
    lane->check_name = NULL;
    lane->check_bytes = NULL;
    if (!name) return 0;
    if (rank > 16) rank = -1;
    lane->check_name = strdup(name);
    lane->check_size = size;
    lane->check_datatype = datatype;
    lane->check_rank = rank;
    for (int d = 0; d < rank; d++) lane->check_dims[d] = dims[d];
    if (bytes) {
        lane->check_bytes = malloc(size ? size : 1);
        if (lane->check_bytes) memcpy(lane->check_bytes, bytes, size);
    }
    return lane->check_name && (!bytes || lane->check_bytes) ? 0 : -1;
}

/* submitted, completed, errors, in_flight, issued, slots, out_bytes, dropped, issuing_done,
 * bad_outputs, timeouts, peak_in_server */
void fp_lane_stats(fp_lane *lane, uint64_t *out)
{
    out[0] = atomic_load(&lane->submitted);
    out[1] = atomic_load(&lane->completed);
    out[2] = atomic_load(&lane->errors);
    pthread_mutex_lock(&lane->mu);
    out[3] = (uint64_t)lane->in_flight;
    out[5] = (uint64_t)lane->n_slots;
    pthread_mutex_unlock(&lane->mu);
    out[4] = atomic_load(&lane->issued);
    out[6] = atomic_load(&lane->out_bytes);
    out[7] = atomic_load(&lane->dropped);
    out[8] = (uint64_t)atomic_load(&lane->issuing_done);
    out[9] = atomic_load(&lane->bad_outputs);
    out[10] = atomic_load(&lane->timeouts);
    out[11] = (uint64_t)atomic_load(&lane->peak_in_server);
}

/* A request whose final response has not come within timeout_ns of its submission counts as
 * an error, once (a late response is then not counted); 0 or less: none. Any time. */
void fp_lane_set_timeout(fp_lane *lane, int64_t timeout_ns)
{
    atomic_store(&lane->timeout_ns, timeout_ns > 0 ? timeout_ns : 0);
    pthread_mutex_lock(&lane->mu);
    lane->next_scan = 0;
    pthread_cond_broadcast(&lane->cv); /* a thread waiting without a time limit: now with one */
    pthread_mutex_unlock(&lane->mu);
}

int fp_lane_fileno(fp_lane *lane) { return lane->efd; }

/* The first error's message, or NULL. */
const char *fp_lane_first_error(fp_lane *lane)
{
    return atomic_load(&lane->has_error) == 2 ? lane->first_error : NULL;
}

/* The i-th distinct error message into buf, and its count; i == MSG_TOP gives the count of
 * the messages past the table (buf left empty). Returns 0 past the end. */
int fp_lane_error_message(fp_lane *lane, int i, char *buf, size_t len, unsigned long long *count)
{
    int found = 0;
    pthread_mutex_lock(&lane->msg_mu);
    if (i >= 0 && i < lane->n_msgs) {
        copy_msg(buf, len, lane->msgs[i].text);
        *count = lane->msgs[i].count;
        found = 1;
    } else if (i == MSG_TOP && lane->msg_other) {
        if (len) buf[0] = 0;
        *count = lane->msg_other;
        found = 1;
    }
    pthread_mutex_unlock(&lane->msg_mu);
    return found;
}

/* The retained response (keep_last), now the caller's to delete; NULL if none. */
void *fp_lane_take_last(fp_lane *lane)
{
    return atomic_exchange(&lane->last_response, NULL);
}

/* Free the lane. Refuses (returns 0, frees nothing) while the core still owns a request: its
 * callbacks would write into freed memory; leaking is the lesser harm. 1 = freed. */
int fp_lane_free(fp_lane *lane)
{
    if (!lane) return 1;
    if (fp_lane_stop(lane, 0) == 0) return 0;
    TRITONSERVER_InferenceResponse *last = atomic_exchange(&lane->last_response, NULL);
    if (last) {
        TRITONSERVER_Error *e = T.ResponseDelete(last);
        if (e) T.ErrorDelete(e);
    }
    fp_slot *s = lane->all;
    while (s) {
        fp_slot *next = s->next_all;
        slot_drop_request(s);
        free(s->error);
        free(s);
        s = next;
    }
    for (int i = 0; i < lane->n_inputs; i++) {
        free(lane->inputs[i].name);
        free(lane->inputs[i].data);
    }
    free(lane->inputs);
    free(lane->entry_start);
    free(lane->model);
    free(lane->sched);
    free(lane->check_name);
    free(lane->check_bytes);
    for (int b = 0; b < N_BUFS; b++) {
        free(lane->bufs[b].v[0]);
        free(lane->bufs[b].v[1]);
    }
    if (lane->efd >= 0) close(lane->efd);
    pthread_mutex_destroy(&lane->mu);
    pthread_mutex_destroy(&lane->lat_mu);
    pthread_mutex_destroy(&lane->msg_mu);
    pthread_cond_destroy(&lane->cv);
    free(lane);
    return 1;
}


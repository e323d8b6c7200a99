/* The communicator: the world of processes an SPMD module runs across, over Open MPI. The one
 * file of latch that includes mpi.h; the collective kernels see the world through the
 * functions declared in runtime.h only, so MPI stays out of every other layer.
 *
 * The world is MPI's (one per process): latch initialises MPI with MPI_Init_thread at
 * MPI_THREAD_SERIALIZED (every call here holds one mutex) unless the embedder already did, and
 * works on its own duplicate of MPI_COMM_WORLD, with errors returned rather than fatal, so its
 * messages never meet the embedder's.
 *
 * No call waits forever: every request is polled until it completes or the collective timeout
 * passes. Before any data moves, rt_comm_agree has every rank send every other rank the
 * signature of the collective it reached (op, shapes, groups): a rank that never arrives is
 * named once the timeout passes, a rank at another op or another shape is named at once. A
 * timeout leaves requests in flight that cannot be taken back, so the world is then marked
 * broken: later collectives fail at once, and closing it does not call MPI_Finalize (which
 * would wait for the lost rank). */
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"

#define SIGNATURE_BYTES 256
#define GROUP_CACHE 32
#define PENDING_MAX 64

/* A sub-communicator made by MPI_Comm_split for one set of groups (every rank's groups are the
 * same, so every rank makes and finds the same ones in the same order). */
typedef struct split_comm {
  int *members; /* the groups' members in order, then the sizes: key_len ints */
  int key_len;
  MPI_Comm comm;
} split_comm;

/* A transfer started and not yet finished (an async -start before its -done): it writes into
 * target's data (a reference held until it finishes), through blocks when the data arrives
 * in group order and is laid out at the finish. */
typedef struct pending {
  rt_value *target;
  MPI_Request requests[2];
  int peers[2];       /* the ranks of a point-to-point exchange, -1 for a collective */
  char *send;         /* owned: a copy of what is sent */
  char *blocks;       /* owned: a gather's blocks, handed to the caller of the finish */
  char what[160];
} pending;

struct rt_comm {
  int refcount;
  bool owns_mpi; /* latch called MPI_Init_thread: it finalizes */
  bool broken;   /* a collective timed out or failed: the ranks are out of step */
  bool left;     /* rt_comm_leave: MPI's part is closed, the handle stays until the last close */
  bool inherited; /* this process is a forked child of the one that opened it: MPI is that one's */
  MPI_Comm world;
  int rank, size;
  double timeout;
  unsigned sequence; /* collectives reached, the same count on every rank */
  split_comm splits[GROUP_CACHE];
  int split_count;
  pending pendings[PENDING_MAX];
  int pending_count;
  pthread_mutex_t lock;
};

static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_comm *the_world;

/* fork() waits for the world's lock (held through every MPI call) and open_lock, so a child
 * never inherits them held by a thread it does not have. Not when the forking thread holds
 * one itself: MPI forks inside its own calls (a singleton's MPI_Init_thread starts its
 * daemon so), and fork must not wait for its own thread. MPI itself is the parent's: its
 * connections to the other ranks are the parent's, and a message the child sent over them
 * would reach the ranks as the parent's. So in the child every collective fails at once,
 * saying so, and closing the world there frees nothing of MPI's (no MPI_Finalize). */
static _Thread_local bool holds_open, holds_world;
static bool fork_took_open, fork_took_world; /* by the running fork (glibc runs one at a time) */

static void fork_prepare(void) {
  rt_test_at(RT_TEST_FORK_WAITS_WORLD);
  fork_took_open = !holds_open;
  if (fork_took_open) pthread_mutex_lock(&open_lock);
  fork_took_world = the_world && !holds_world;
  if (fork_took_world) pthread_mutex_lock(&the_world->lock);
}

static void fork_parent(void) {
  if (fork_took_world) pthread_mutex_unlock(&the_world->lock);
  if (fork_took_open) pthread_mutex_unlock(&open_lock);
}

static void fork_child(void) {
  if (the_world) the_world->inherited = true;
  fork_parent();
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static void fork_setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void lock_open(void) {
  pthread_mutex_lock(&open_lock);
  holds_open = true;
}

static void unlock_open(void) {
  holds_open = false;
  pthread_mutex_unlock(&open_lock);
}

/* The world's lock, taken by every call that uses MPI or the world's state. */
static void lock_world(rt_comm *comm) {
  pthread_mutex_lock(&comm->lock);
  holds_world = true;
  rt_test_at(RT_TEST_WORLD_LOCKED);
}

static void unlock_world(rt_comm *comm) {
  holds_world = false;
  pthread_mutex_unlock(&comm->lock);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static hlo_status mpi_fail(hlo_diag *diag, int code, const char *what, const char *call) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", code);
  return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: %s failed: %s", what, call, text);
}

static hlo_status init_mpi(rt_comm *comm, hlo_diag *diag) {
  int initialized = 0, finalized = 0, provided = 0;
  MPI_Finalized(&finalized);
  if (finalized) return hlo_diag_set(diag, HLO_ERR_INPUT, "MPI was finalized: it cannot be opened again");
  MPI_Initialized(&initialized);
  if (!initialized) {
    int code = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (code != MPI_SUCCESS) return mpi_fail(diag, code, "opening the world", "MPI_Init_thread");
    comm->owns_mpi = true;
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED)
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "MPI was initialised at thread level %d; latch needs MPI_THREAD_SERIALIZED (%d) or more",
                        provided, MPI_THREAD_SERIALIZED);
  int code = MPI_Comm_dup(MPI_COMM_WORLD, &comm->world);
  if (code != MPI_SUCCESS) return mpi_fail(diag, code, "opening the world", "MPI_Comm_dup");
  MPI_Comm_set_errhandler(comm->world, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm->world, &comm->rank);
  MPI_Comm_size(comm->world, &comm->size);
  return HLO_OK;
}

rt_comm *rt_comm_open(double timeout_seconds, hlo_diag *diag) {
  pthread_once(&fork_once, fork_setup);
  lock_open();
  rt_comm *comm = the_world;
  if (comm) {
    comm->refcount++;
    unlock_open();
    return comm;
  }
  comm = calloc(1, sizeof *comm);
  if (!comm) {
    unlock_open();
    hlo_diag_set(diag, HLO_ERR_INTERNAL, "out of memory opening the world");
    return NULL;
  }
  comm->refcount = 1;
  comm->world = MPI_COMM_NULL;
  comm->timeout = timeout_seconds > 0 ? timeout_seconds : RT_COMM_DEFAULT_TIMEOUT;
  pthread_mutex_init(&comm->lock, NULL);
  if (init_mpi(comm, diag) != HLO_OK) {
    if (comm->owns_mpi) MPI_Finalize();
    pthread_mutex_destroy(&comm->lock);
    free(comm);
    unlock_open();
    return NULL;
  }
  the_world = comm;
  unlock_open();
  return comm;
}

/* Frees MPI's part of the world (and finalizes MPI when latch initialised it) once; a broken
 * world frees nothing (MPI would wait for the lost rank), nor does a forked child (MPI is its
 * parent's). */
static void leave_locked(rt_comm *comm) {
  if (comm->left) return;
  comm->left = true;
  if (comm->broken || comm->inherited) return;
  for (int i = 0; i < comm->split_count; i++) MPI_Comm_free(&comm->splits[i].comm);
  MPI_Comm_free(&comm->world);
  if (comm->owns_mpi) MPI_Finalize();
}

void rt_comm_close(rt_comm *comm) {
  if (!comm) return;
  lock_open();
  if (--comm->refcount > 0) {
    unlock_open();
    return;
  }
  the_world = NULL;
  unlock_open();
  for (int i = 0; i < comm->pending_count; i++) { /* never finished: an evaluation failed between */
    comm->broken = true;
    free(comm->pendings[i].blocks), free(comm->pendings[i].send);
    rt_value_release(comm->pendings[i].target);
  }
  leave_locked(comm);
  for (int i = 0; i < comm->split_count; i++) free(comm->splits[i].members);
  pthread_mutex_destroy(&comm->lock);
  free(comm);
}

void rt_comm_leave(rt_comm *comm) {
  if (!comm) return;
  lock_world(comm);
  leave_locked(comm);
  unlock_world(comm);
}

int rt_comm_rank(const rt_comm *comm) { return comm->rank; }
int rt_comm_size(const rt_comm *comm) { return comm->size; }
bool rt_comm_broken(const rt_comm *comm) { return comm->broken; }

unsigned rt_comm_collectives(rt_comm *comm) {
  lock_world(comm);
  unsigned reached = comm->sequence;
  unlock_world(comm);
  return reached;
}

/* ---- waiting with a deadline ---- */

/* Polls requests until all complete or the timeout passes. peers[i] (when peers is given)
 * names the rank request i waits on, for the message. On a timeout or error the world is
 * broken and the pending requests are left to MPI (a send cannot be taken back). */
static hlo_status wait_all(rt_comm *comm, int n, MPI_Request *requests, const int *peers, const char *what,
                           const char *waiting_for, hlo_diag *diag) {
  double start = now(), deadline = start + comm->timeout;
  for (long spins = 0;; spins++) {
    int pending = -1;
    for (int i = 0; i < n; i++) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      int code = MPI_Test(&requests[i], &done, MPI_STATUS_IGNORE);
      if (code != MPI_SUCCESS) {
        comm->broken = true;
        if (peers) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: the message from rank %d failed", what, peers[i]);
        return mpi_fail(diag, code, what, waiting_for);
      }
      if (!done && pending < 0) pending = i;
    }
    if (pending < 0) return HLO_OK;
    double t = now();
    if (t > deadline) {
      comm->broken = true;
      if (peers)
        return hlo_diag_set(diag, HLO_ERR_INTERNAL,
                            "%s: rank %d did not reach it within %g s (LATCH_COLLECTIVE_TIMEOUT); this is rank %d of %d",
                            what, peers[pending], comm->timeout, comm->rank, comm->size);
      return hlo_diag_set(diag, HLO_ERR_INTERNAL,
                          "%s: %s did not complete within %g s (LATCH_COLLECTIVE_TIMEOUT): a rank of its group "
                          "stopped; this is rank %d of %d",
                          what, waiting_for, comm->timeout, comm->rank, comm->size);
    }
    /* Open MPI moves a non-blocking collective's data only inside MPI calls: poll hard while
     * a transfer is likely under way, then back off to a millisecond. */
    if (t - start < 1.0) sched_yield();
    else nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
  }
}

static hlo_status check_usable(rt_comm *comm, const char *what, hlo_diag *diag) {
  if (comm->inherited)
    return hlo_diag_set(diag, HLO_ERR_INPUT,
                        "%s: this process is a forked child of the one that joined the world, and MPI is that "
                        "process's: a child takes part in no collective",
                        what);
  if (comm->left) return hlo_diag_set(diag, HLO_ERR_INPUT, "%s: this process has left the world", what);
  if (!comm->broken) return HLO_OK;
  return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: an earlier collective failed, so the ranks are out of step", what);
}

/* ---- agreement ---- */

static hlo_status agree_locked(rt_comm *comm, const char *what, const char *signature, hlo_diag *diag) {
  int n = comm->size, tag = (int)(comm->sequence++ % 16384) * 2;
  char mine[SIGNATURE_BYTES] = {0};
  snprintf(mine, sizeof mine, "%s", signature);
  char *theirs = calloc((size_t)n, SIGNATURE_BYTES);
  MPI_Request *requests = calloc((size_t)n * 2, sizeof *requests);
  int *peers = calloc((size_t)n * 2, sizeof *peers);
  if (!theirs || !requests || !peers) {
    free(theirs), free(requests), free(peers);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory", what);
  }
  int count = 0;
  hlo_status status = HLO_OK;
  for (int r = 0; r < n && status == HLO_OK; r++) {
    if (r == comm->rank) continue;
    int code = MPI_Irecv(theirs + (size_t)r * SIGNATURE_BYTES, SIGNATURE_BYTES, MPI_CHAR, r, tag, comm->world,
                         &requests[count]);
    peers[count++] = r;
    if (code == MPI_SUCCESS)
      code = MPI_Isend(mine, SIGNATURE_BYTES, MPI_CHAR, r, tag, comm->world, &requests[count]);
    peers[count++] = r;
    if (code != MPI_SUCCESS) status = mpi_fail(diag, code, what, "sending its signature");
  }
  if (status == HLO_OK) status = wait_all(comm, count, requests, peers, what, "the signature exchange", diag);
  for (int r = 0; r < n && status == HLO_OK; r++) {
    const char *other = theirs + (size_t)r * SIGNATURE_BYTES;
    if (r == comm->rank || strncmp(other, mine, SIGNATURE_BYTES) == 0) continue;
    comm->broken = true;
    status = hlo_diag_set(diag, HLO_ERR_INPUT,
                          "%s: the ranks' collectives do not match: rank %d has [%.*s] where rank %d has [%.*s]",
                          what, comm->rank, SIGNATURE_BYTES, mine, r, SIGNATURE_BYTES, other);
  }
  free(theirs), free(requests), free(peers);
  return status;
}

hlo_status rt_comm_agree(rt_comm *comm, const char *what, const char *signature, hlo_diag *diag) {
  lock_world(comm);
  hlo_status status = check_usable(comm, what, diag);
  if (status == HLO_OK) status = agree_locked(comm, what, signature, diag);
  unlock_world(comm);
  return status;
}

/* ---- groups ---- */

/* The sub-communicator of this rank's group (MPI_COMM_SELF-like splits made once per set of
 * groups), and this rank's index in it. */
static hlo_status group_comm(rt_comm *comm, const rt_comm_groups *groups, MPI_Comm *out, const char *what,
                             hlo_diag *diag) {
  int total = 0;
  for (int g = 0; g < groups->count; g++) total += groups->sizes[g];
  int key_len = total + groups->count;
  for (int i = 0; i < comm->split_count; i++) {
    split_comm *s = &comm->splits[i];
    if (s->key_len == key_len && memcmp(s->members, groups->members, sizeof(int) * (size_t)total) == 0 &&
        memcmp(s->members + total, groups->sizes, sizeof(int) * (size_t)groups->count) == 0) {
      *out = s->comm;
      return HLO_OK;
    }
  }
  int color = -1, key = 0;
  for (int g = 0, at = 0; g < groups->count; at += groups->sizes[g++])
    for (int i = 0; i < groups->sizes[g]; i++)
      if (groups->members[at + i] == comm->rank) color = g, key = i;
  if (color < 0) return hlo_diag_set(diag, HLO_ERR_INPUT, "%s: rank %d is in none of its groups", what, comm->rank);
  int *members = malloc(sizeof(int) * (size_t)key_len);
  if (!members) return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory", what);
  memcpy(members, groups->members, sizeof(int) * (size_t)total);
  memcpy(members + total, groups->sizes, sizeof(int) * (size_t)groups->count);
  MPI_Comm split;
  int code = MPI_Comm_split(comm->world, color, key, &split);
  if (code != MPI_SUCCESS) {
    free(members);
    comm->broken = true;
    return mpi_fail(diag, code, what, "MPI_Comm_split");
  }
  MPI_Comm_set_errhandler(split, MPI_ERRORS_RETURN);
  if (comm->split_count == GROUP_CACHE) { /* the oldest goes; every rank drops the same one */
    MPI_Comm_free(&comm->splits[0].comm);
    free(comm->splits[0].members);
    memmove(comm->splits, comm->splits + 1, sizeof comm->splits[0] * (GROUP_CACHE - 1));
    comm->split_count--;
  }
  comm->splits[comm->split_count++] = (split_comm){.members = members, .key_len = key_len, .comm = split};
  *out = split;
  return HLO_OK;
}

/* ---- data movement ---- */

static MPI_Datatype mpi_type(hlo_dtype dtype) {
  switch (dtype) {
    case HLO_F32: return MPI_FLOAT;
    case HLO_F64: return MPI_DOUBLE;
    case HLO_S8: return MPI_INT8_T;
    case HLO_S16: return MPI_INT16_T;
    case HLO_S32: return MPI_INT32_T;
    case HLO_S64: return MPI_INT64_T;
    case HLO_U8: return MPI_UINT8_T;
    case HLO_U16: return MPI_UINT16_T;
    case HLO_U32: return MPI_UINT32_T;
    case HLO_U64: return MPI_UINT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

bool rt_comm_reducible(hlo_dtype dtype) { return mpi_type(dtype) != MPI_DATATYPE_NULL; }

static MPI_Op mpi_op(rt_comm_reduce op) {
  switch (op) {
    case RT_COMM_MAX: return MPI_MAX;
    case RT_COMM_MIN: return MPI_MIN;
    case RT_COMM_PROD: return MPI_PROD;
    default: return MPI_SUM;
  }
}

/* Counts above INT_MAX would need derived types; collectives that large are refused. */
static hlo_status fits_int(int64_t count, const char *what, hlo_diag *diag) {
  if (count >= 0 && count <= 0x7fffffff) return HLO_OK;
  return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: %lld elements in one message is more than MPI's int counts hold",
                      what, (long long)count);
}

typedef enum { MOVE_ALLREDUCE, MOVE_ALLGATHER, MOVE_ALLTOALL, MOVE_REDUCE_SCATTER, MOVE_BCAST } move_kind;

typedef struct move {
  move_kind kind;
  const void *send;
  void *recv;
  int64_t count; /* elements (reductions) or bytes (the rest) per member */
  hlo_dtype dtype;
  rt_comm_reduce op;
  int root;
} move;

static int start_move(const move *m, MPI_Comm comm, MPI_Request *request) {
  int count = (int)m->count;
  switch (m->kind) {
    case MOVE_ALLREDUCE:
      return MPI_Iallreduce(m->send ? m->send : MPI_IN_PLACE, m->recv, count, mpi_type(m->dtype), mpi_op(m->op), comm,
                            request);
    case MOVE_ALLGATHER: return MPI_Iallgather(m->send, count, MPI_BYTE, m->recv, count, MPI_BYTE, comm, request);
    case MOVE_ALLTOALL: return MPI_Ialltoall(m->send, count, MPI_BYTE, m->recv, count, MPI_BYTE, comm, request);
    case MOVE_REDUCE_SCATTER:
      return MPI_Ireduce_scatter_block(m->send, m->recv, count, mpi_type(m->dtype), mpi_op(m->op), comm, request);
    case MOVE_BCAST: return MPI_Ibcast(m->recv, count, MPI_BYTE, m->root, comm, request);
  }
  return MPI_ERR_OTHER;
}

static const char *move_name(move_kind kind) {
  static const char *const names[] = {"MPI_Iallreduce", "MPI_Iallgather", "MPI_Ialltoall",
                                      "MPI_Ireduce_scatter_block", "MPI_Ibcast"};
  return names[kind];
}

/* Keeps a started transfer for rt_comm_finish: later's requests and buffers become the
 * world's, target is retained. Called with the lock held. */
static void keep_pending(rt_comm *comm, pending *later, rt_value *target, const char *what) {
  later->target = rt_value_retain(target);
  snprintf(later->what, sizeof later->what, "%s", what);
  comm->pendings[comm->pending_count++] = *later;
}

/* Starts the move; waits for it, or with later (an async start) keeps it pending. */
static hlo_status run_move(rt_comm *comm, const rt_comm_groups *groups, const move *m, pending *later,
                           rt_value *target, const char *what, hlo_diag *diag) {
  lock_world(comm);
  MPI_Comm sub = MPI_COMM_NULL;
  hlo_status status = check_usable(comm, what, diag);
  if (status == HLO_OK) status = fits_int(m->count, what, diag);
  if (status == HLO_OK && later && comm->pending_count == PENDING_MAX)
    status = hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: more than %d async collectives in flight", what, PENDING_MAX);
  if (status == HLO_OK) status = group_comm(comm, groups, &sub, what, diag);
  if (status == HLO_OK) {
    MPI_Request request = MPI_REQUEST_NULL;
    int code = start_move(m, sub, &request);
    if (code != MPI_SUCCESS) {
      comm->broken = true;
      status = mpi_fail(diag, code, what, move_name(m->kind));
    } else if (later) {
      later->requests[0] = request, later->requests[1] = MPI_REQUEST_NULL;
      later->peers[0] = later->peers[1] = -1;
      keep_pending(comm, later, target, what);
    } else {
      status = wait_all(comm, 1, &request, NULL, what, move_name(m->kind), diag);
    }
  }
  unlock_world(comm);
  return status;
}

/* ---- the large all-reduce: a ring of point-to-point transfers ----
 *
 * Open MPI's non-blocking MPI_Iallreduce moved large messages at about half the bandwidth of
 * its blocking MPI_Allreduce, and a blocking call cannot be given a deadline. So a large
 * all-reduce is the bandwidth-optimal ring over point-to-point messages, each step waited for
 * with the deadline: the data cut into one chunk per member; n - 1 steps in which each member
 * sends one chunk to the next and receives one from the previous straight into its place in
 * the result, folding its own operand's chunk into it (MPI_Reduce_local, MPI's own
 * reduction), after which member k holds chunk k + 1 reduced over everyone; then n - 1 steps
 * passing the reduced chunks on around the ring. The operand is only read (the first step
 * sends from it), so the result needs no copy of it first, and each chunk is reduced once,
 * so every member gets the same bits. */
#define RING_MIN_BYTES (1 << 20)

typedef struct ring {
  rt_comm *comm;
  MPI_Comm sub;
  int n, k, tag;
  const char *send; /* the operand, read */
  char *recv;       /* the result: written by the transfers and the folds */
  int64_t count;
  size_t elem;
  MPI_Datatype type;
  MPI_Op op;
  const char *what;
} ring;

static int64_t chunk_start(const ring *r, int c) { return r->count * c / r->n; }
static int chunk_count(const ring *r, int c) { return (int)(chunk_start(r, c + 1) - chunk_start(r, c)); }
static const char *send_chunk(const ring *r, int c) { return r->send + chunk_start(r, c) * (int64_t)r->elem; }
static char *recv_chunk(const ring *r, int c) { return r->recv + chunk_start(r, c) * (int64_t)r->elem; }

/* One step: chunk out (from from) to the next member, chunk in from the previous one into
 * its place in the result. */
static hlo_status ring_step(ring *r, const char *from, int out, int in, hlo_diag *diag) {
  int next = (r->k + 1) % r->n, prev = (r->k + r->n - 1) % r->n;
  MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int code = MPI_Irecv(recv_chunk(r, in), chunk_count(r, in), r->type, prev, r->tag, r->sub, &requests[0]);
  if (code == MPI_SUCCESS)
    code = MPI_Isend(from + chunk_start(r, out) * (int64_t)r->elem, chunk_count(r, out), r->type, next, r->tag,
                     r->sub, &requests[1]);
  if (code != MPI_SUCCESS) {
    r->comm->broken = true;
    return mpi_fail(diag, code, r->what, "MPI_Isend/MPI_Irecv");
  }
  return wait_all(r->comm, 2, requests, NULL, r->what, "the all-reduce's ring", diag);
}

static hlo_status ring_allreduce(ring *r, hlo_diag *diag) {
  hlo_status status = HLO_OK;
  for (int s = 0; status == HLO_OK && s < r->n - 1; s++) { /* the first step sends the operand's own chunk */
    int out = (r->k - s + r->n) % r->n, in = (r->k - s - 1 + 2 * r->n) % r->n;
    status = ring_step(r, s == 0 ? r->send : r->recv, out, in, diag);
    if (status == HLO_OK) MPI_Reduce_local(send_chunk(r, in), recv_chunk(r, in), chunk_count(r, in), r->type, r->op);
  }
  for (int s = 0; status == HLO_OK && s < r->n - 1; s++) {
    int out = (r->k + 1 - s + r->n) % r->n, in = (r->k - s + r->n) % r->n;
    status = ring_step(r, r->recv, out, in, diag);
  }
  return status;
}

/* The ring on this rank's group, with the lock held; *used false when the message is small
 * (or the group one member) and MPI_Iallreduce should carry it. */
static hlo_status try_ring(rt_comm *comm, const rt_comm_groups *groups, const void *send, void *recv, int64_t count,
                           hlo_dtype dtype, rt_comm_reduce op, const char *what, bool *used, hlo_diag *diag) {
  size_t elem = hlo_dtype_size(dtype);
  *used = false;
  MPI_Comm sub = MPI_COMM_NULL;
  int n = 1, k = 0;
  if ((size_t)count * elem < RING_MIN_BYTES) return HLO_OK;
  hlo_status status = group_comm(comm, groups, &sub, what, diag);
  if (status != HLO_OK) return status;
  MPI_Comm_size(sub, &n);
  MPI_Comm_rank(sub, &k);
  if (n < 2 || count < n) return HLO_OK;
  *used = true;
  ring r = {comm, sub, n, k, (int)((comm->sequence - 1) % 16384) * 2 + 1, send, recv, count, elem,
            mpi_type(dtype), mpi_op(op), what};
  return ring_allreduce(&r, diag);
}

hlo_status rt_comm_allreduce(rt_comm *comm, const rt_comm_groups *groups, const void *send, void *recv, int64_t count,
                             hlo_dtype dtype, rt_comm_reduce op, const char *what, hlo_diag *diag) {
  if (!rt_comm_reducible(dtype)) return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: MPI has no %s", what, hlo_dtype_name(dtype));
  if (count > 0 && send == recv)
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: the all-reduce's operand is its result", what);
  lock_world(comm);
  bool used = false;
  hlo_status status = check_usable(comm, what, diag);
  if (status == HLO_OK) status = fits_int(count, what, diag);
  if (status == HLO_OK) status = try_ring(comm, groups, send, recv, count, dtype, op, what, &used, diag);
  unlock_world(comm);
  if (status != HLO_OK || used) return status;
  move m = {.kind = MOVE_ALLREDUCE, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
  return run_move(comm, groups, &m, NULL, NULL, what, diag);
}

hlo_status rt_comm_allgather(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes, void *recv,
                             const char *what, hlo_diag *diag) {
  move m = {.kind = MOVE_ALLGATHER, .send = send, .recv = recv, .count = bytes};
  return run_move(comm, groups, &m, NULL, NULL, what, diag);
}

hlo_status rt_comm_alltoall(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes, void *recv,
                            const char *what, hlo_diag *diag) {
  move m = {.kind = MOVE_ALLTOALL, .send = send, .recv = recv, .count = bytes};
  return run_move(comm, groups, &m, NULL, NULL, what, diag);
}

hlo_status rt_comm_reduce_scatter(rt_comm *comm, const rt_comm_groups *groups, const void *send, void *recv,
                                  int64_t count, hlo_dtype dtype, rt_comm_reduce op, const char *what, hlo_diag *diag) {
  if (!rt_comm_reducible(dtype)) return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: MPI has no %s", what, hlo_dtype_name(dtype));
  move m = {.kind = MOVE_REDUCE_SCATTER, .send = send, .recv = recv, .count = count, .dtype = dtype, .op = op};
  return run_move(comm, groups, &m, NULL, NULL, what, diag);
}

hlo_status rt_comm_broadcast(rt_comm *comm, const rt_comm_groups *groups, void *data, int64_t bytes, int root,
                             const char *what, hlo_diag *diag) {
  move m = {.kind = MOVE_BCAST, .recv = data, .count = bytes, .root = root};
  return run_move(comm, groups, &m, NULL, NULL, what, diag);
}

static hlo_status exchange(rt_comm *comm, int to, const void *send, int from, void *recv, int64_t bytes,
                           pending *later, rt_value *target, const char *what, hlo_diag *diag) {
  lock_world(comm);
  hlo_status status = check_usable(comm, what, diag);
  if (status == HLO_OK) status = fits_int(bytes, what, diag);
  if (status == HLO_OK && later && comm->pending_count == PENDING_MAX)
    status = hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: more than %d async collectives in flight", what, PENDING_MAX);
  if (status == HLO_OK) {
    /* The agreement before it took an even tag; the data goes on the odd one after it. */
    int tag = (int)((comm->sequence - 1) % 16384) * 2 + 1;
    MPI_Request requests[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    int peers[2] = {from, to};
    int code = MPI_SUCCESS;
    if (from >= 0) code = MPI_Irecv(recv, (int)bytes, MPI_BYTE, from, tag, comm->world, &requests[0]);
    if (code == MPI_SUCCESS && to >= 0) code = MPI_Isend(send, (int)bytes, MPI_BYTE, to, tag, comm->world, &requests[1]);
    if (code != MPI_SUCCESS) {
      comm->broken = true;
      status = mpi_fail(diag, code, what, "MPI_Isend/MPI_Irecv");
    } else if (later) {
      memcpy(later->requests, requests, sizeof requests);
      memcpy(later->peers, peers, sizeof peers);
      keep_pending(comm, later, target, what);
    } else {
      status = wait_all(comm, 2, requests, peers, what, "the exchange", diag);
    }
  }
  unlock_world(comm);
  return status;
}

hlo_status rt_comm_exchange(rt_comm *comm, int to, const void *send, int from, void *recv, int64_t bytes,
                            const char *what, hlo_diag *diag) {
  return exchange(comm, to, send, from, recv, bytes, NULL, NULL, what, diag);
}

/* ---- async starts and their finish ---- */

/* A copy of the bytes to send, owned by the pending transfer: the sender's buffer may be
 * reused before the -done. */
static char *send_copy(const void *send, int64_t bytes) {
  char *copy = malloc((size_t)bytes + 1);
  if (copy) memcpy(copy, send, (size_t)bytes);
  return copy;
}

hlo_status rt_comm_allreduce_start(rt_comm *comm, const rt_comm_groups *groups, rt_value *target, rt_comm_reduce op,
                                   const char *what, hlo_diag *diag) {
  if (!rt_comm_reducible(target->shape.dtype))
    return hlo_diag_set(diag, HLO_ERR_UNSUPPORTED, "%s: MPI has no %s", what, hlo_dtype_name(target->shape.dtype));
  move m = {.kind = MOVE_ALLREDUCE, .recv = target->data, .count = target->count, .dtype = target->shape.dtype, .op = op};
  pending later = {0};
  return run_move(comm, groups, &m, &later, target, what, diag);
}

hlo_status rt_comm_allgather_start(rt_comm *comm, const rt_comm_groups *groups, const void *send, int64_t bytes,
                                   rt_value *target, const char *what, hlo_diag *diag) {
  pending later = {0};
  int members = 0;
  for (int g = 0, at = 0; g < groups->count; at += groups->sizes[g++])
    for (int i = 0; i < groups->sizes[g]; i++)
      if (groups->members[at + i] == comm->rank) members = groups->sizes[g];
  later.send = send_copy(send, bytes);
  later.blocks = malloc((size_t)(bytes * members) + 1);
  if (!later.send || !later.blocks) {
    free(later.send), free(later.blocks);
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory", what);
  }
  move m = {.kind = MOVE_ALLGATHER, .send = later.send, .recv = later.blocks, .count = bytes};
  hlo_status status = run_move(comm, groups, &m, &later, target, what, diag);
  if (status != HLO_OK) free(later.send), free(later.blocks);
  return status;
}

hlo_status rt_comm_exchange_start(rt_comm *comm, int to, const void *send, int from, rt_value *target, int64_t bytes,
                                  const char *what, hlo_diag *diag) {
  pending later = {0};
  if (to >= 0 && !(later.send = send_copy(send, bytes)))
    return hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory", what);
  hlo_status status = exchange(comm, to, later.send, from, target->data, bytes, &later, target, what, diag);
  if (status != HLO_OK) free(later.send);
  return status;
}

hlo_status rt_comm_finish(rt_comm *comm, const rt_value *target, void **blocks, const char *what, hlo_diag *diag) {
  if (blocks) *blocks = NULL;
  rt_value *released = NULL;
  lock_world(comm);
  int i = 0;
  while (i < comm->pending_count && comm->pendings[i].target != target) i++;
  hlo_status status = HLO_OK;
  if (i < comm->pending_count) { /* none: the start completed before it returned */
    pending p = comm->pendings[i];
    comm->pendings[i] = comm->pendings[--comm->pending_count];
    status = check_usable(comm, what, diag);
    bool peers = p.peers[0] >= 0 || p.peers[1] >= 0;
    if (status == HLO_OK) status = wait_all(comm, 2, p.requests, peers ? p.peers : NULL, p.what, "the transfer", diag);
    free(p.send);
    if (status == HLO_OK && blocks) *blocks = p.blocks;
    else free(p.blocks);
    released = p.target;
  }
  unlock_world(comm);
  rt_value_release(released); /* outside the lock: a kept buffer's release takes a lock of its own */
  return status;
}

/* ---- sharing bytes from rank 0 ---- */

hlo_status rt_comm_share(rt_comm *comm, void **bytes, size_t *len, const char *what, hlo_diag *diag) {
  lock_world(comm);
  hlo_status status = check_usable(comm, what, diag);
  long long size = comm->rank == 0 ? (long long)*len : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  if (status == HLO_OK) {
    int code = MPI_Ibcast(&size, 1, MPI_LONG_LONG, 0, comm->world, &request);
    status = code == MPI_SUCCESS ? wait_all(comm, 1, &request, NULL, what, "MPI_Ibcast", diag)
                                 : mpi_fail(diag, code, what, "MPI_Ibcast");
  }
  if (status == HLO_OK && (size <= 0 || size > 0x7fffffff))
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: rank 0 has %s", what,
                          size <= 0 ? "nothing to share (it failed)" : "more than 2 GiB to share");
  char *data = comm->rank == 0 ? *bytes : NULL;
  if (status == HLO_OK && comm->rank != 0 && !(data = malloc((size_t)size)))
    status = hlo_diag_set(diag, HLO_ERR_INTERNAL, "%s: out of memory for %lld bytes", what, size);
  if (status == HLO_OK) {
    int code = MPI_Ibcast(data, (int)size, MPI_BYTE, 0, comm->world, &request);
    status = code == MPI_SUCCESS ? wait_all(comm, 1, &request, NULL, what, "MPI_Ibcast", diag)
                                 : mpi_fail(diag, code, what, "MPI_Ibcast");
  }
  if (comm->rank != 0) {
    if (status == HLO_OK) *bytes = data, *len = (size_t)size;
    else free(data);
  }
  unlock_world(comm);
  return status;
}

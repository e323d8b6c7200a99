/* Process-wide locks that fork waits for (rt_fork_lock, runtime.h). A child has only the
 * thread that forked: a lock another thread held at fork stays held in the child for good
 * (its next user waits forever), and what it guards may be half written there. So fork takes
 * every such lock first (pthread_atfork handlers, registered with the first lock taken), the
 * state each guards is whole when the process is copied, and parent and child both let go.
 *
 * Only for locks under which nothing else is locked, and which are never taken while a lock
 * of another fork handler is held (the kept tables of oneDNN primitives, the kept value
 * buffers): then fork cannot wait for a thread that waits for a lock fork already took,
 * whichever order the handlers run in. A lock is listed the first time it is taken, before it
 * is locked, so fork never misses one that is held. */
#include "runtime.h"

static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static rt_fork_mutex *listed;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  rt_test_at(RT_TEST_FORK_WAITS_FORK_LOCKS);
  pthread_mutex_lock(&list_lock);
  for (rt_fork_mutex *m = listed; m; m = m->next) pthread_mutex_lock(&m->mutex);
}

static void fork_release(void) {
  for (rt_fork_mutex *m = listed; m; m = m->next) pthread_mutex_unlock(&m->mutex);
  pthread_mutex_unlock(&list_lock);
}

static void fork_setup(void) { pthread_atfork(fork_prepare, fork_release, fork_release); }

static void list(rt_fork_mutex *m) {
  pthread_once(&fork_once, fork_setup);
  pthread_mutex_lock(&list_lock);
  if (!atomic_load_explicit(&m->listed, memory_order_relaxed)) {
    m->next = listed;
    listed = m;
    atomic_store_explicit(&m->listed, true, memory_order_release);
  }
  pthread_mutex_unlock(&list_lock);
}

void rt_fork_lock(rt_fork_mutex *m) {
  if (!atomic_load_explicit(&m->listed, memory_order_acquire)) list(m);
  pthread_mutex_lock(&m->mutex);
  rt_test_at(RT_TEST_FORK_LOCK_HELD);
}

void rt_fork_unlock(rt_fork_mutex *m) { pthread_mutex_unlock(&m->mutex); }

/* terra pool: worker threads that run jobs off the main thread.
 *
 * A job is caller-owned memory (no allocation per job): fill in `run` and whatever the job needs,
 * submit it, and take it back from the completion queue when done. A job still queued can be
 * cancelled; a running one finishes. The job's buffers belong to the worker while it runs and
 * come back with the job: nothing is copied.
 *
 * Jobs of every kind share the pool: meshing a tile from a source, reading and decoding a tile
 * from an archive. Threads meet only at the two queues.
 */
/* Threads: every function here but terra_pool_destroy and terra_job_queue_destroy may be called from
 * any thread at once, a job's run included: submit, cancel and the polls take the pool's or the
 * queue's mutex. A job runs on a worker alongside other jobs, so whatever it touches besides its own
 * memory must be thread-safe. From submit until it comes back from a queue (or a cancel returns true)
 * a job is the pool's: do not read or change it. terra_pool_wait_idle waits for every owner's jobs;
 * called from a job it never returns (the job counts itself). Destroy a queue only when no job bound
 * for it is queued or running, and a pool only when no other call on it can come. */
#ifndef TERRA_POOL_H
#define TERRA_POOL_H

#include "terra/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct terra_job terra_job;
typedef struct terra_job_queue terra_job_queue;
struct terra_job {
    /* Runs on a worker. Sets job->status. */
    void (*run)(terra_job *job);
    terra_status status;
    void *user;
    /* Where the job goes when it has run: a completion queue of its owner's, or NULL for the
     * pool's own (terra_pool_poll). Owners sharing a pool each keep their own queue. */
    terra_job_queue *queue;
    terra_job *next_; /* the pool's, while submitted */
};

/* A completion queue: finished jobs wait here until their owner takes them. */
TERRA_API terra_status terra_job_queue_create(terra_job_queue **out);
TERRA_API void terra_job_queue_destroy(terra_job_queue *q);
/* Takes up to `max` finished jobs; returns how many. Never blocks. */
TERRA_API int terra_job_queue_poll(terra_job_queue *q, terra_job **done, int max);

typedef struct terra_pool_desc {
    int threads; /* worker threads; 0 = terra_default_threads() */
} terra_pool_desc;

typedef struct terra_pool terra_pool;

TERRA_API terra_status terra_pool_create(const terra_pool_desc *desc, terra_pool **out);
/* Stops the workers: queued jobs are dropped (they never run and are not returned), running ones
 * finish first and go to their queues. Job memory is always the caller's. */
TERRA_API void terra_pool_destroy(terra_pool *pool);
TERRA_API int terra_pool_threads(const terra_pool *pool);

/* Queues a job (first in, first out). */
TERRA_API void terra_pool_submit(terra_pool *pool, terra_job *job);
/* Removes a job that has not started; true if it was removed (it will not run or complete). */
TERRA_API bool terra_pool_cancel(terra_pool *pool, terra_job *job);
/* Takes up to `max` finished jobs that had no queue of their own; returns how many. */
TERRA_API int terra_pool_poll(terra_pool *pool, terra_job **done, int max);
/* Blocks until every submitted job has finished (or was cancelled). */
TERRA_API void terra_pool_wait_idle(terra_pool *pool);

#ifdef __cplusplus
}
#endif
#endif

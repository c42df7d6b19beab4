/* terra pool: pthread workers, a FIFO of jobs in, completion queues out. */
#include "terra/pool.h"

#include <pthread.h>
#include <unistd.h>

typedef struct job_list {
    terra_job *head, *tail;
} job_list;

struct terra_job_queue {
    pthread_mutex_t lock;
    job_list done;
};

struct terra_pool {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job was queued, or stop */
    pthread_cond_t idle; /* a job finished or was cancelled */
    job_list queued;
    int running;         /* jobs being run now */
    bool stop;
    int nthreads;
    pthread_t *threads;
    terra_job_queue own; /* for jobs without a queue */
};

static void list_push(job_list *l, terra_job *j) {
    j->next_ = NULL;
    if (l->tail) l->tail->next_ = j;
    else l->head = j;
    l->tail = j;
}

static terra_job *list_pop(job_list *l) {
    terra_job *j = l->head;
    if (j) {
        l->head = j->next_;
        if (!l->head) l->tail = NULL;
        j->next_ = NULL;
    }
    return j;
}

static bool list_remove(job_list *l, terra_job *j) {
    terra_job *prev = NULL;
    for (terra_job *it = l->head; it; prev = it, it = it->next_) {
        if (it != j) continue;
        if (prev) prev->next_ = it->next_;
        else l->head = it->next_;
        if (l->tail == it) l->tail = prev;
        it->next_ = NULL;
        return true;
    }
    return false;
}

/* ---- completion queues ------------------------------------------------------------------------- */

static void queue_init(terra_job_queue *q) {
    pthread_mutex_init(&q->lock, NULL);
    q->done.head = q->done.tail = NULL;
}

terra_status terra_job_queue_create(terra_job_queue **out) {
    terra_job_queue *q = terra_alloc(sizeof *q);
    if (!q) return terra_fail(TERRA_E_NOMEM, "job queue: out of memory");
    queue_init(q);
    *out = q;
    return TERRA_OK;
}

void terra_job_queue_destroy(terra_job_queue *q) {
    if (!q) return;
    pthread_mutex_destroy(&q->lock);
    terra_free(q);
}

int terra_job_queue_poll(terra_job_queue *q, terra_job **done, int max) {
    int n = 0;
    pthread_mutex_lock(&q->lock);
    while (n < max && q->done.head) {
        done[n++] = list_pop(&q->done);
    }
    pthread_mutex_unlock(&q->lock);
    return n;
}

/* ---- workers ------------------------------------------------------------------------------------- */

static void *worker(void *arg) {
    terra_pool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->stop && !p->queued.head) pthread_cond_wait(&p->work, &p->lock);
        if (p->stop) break;
        terra_job *j = list_pop(&p->queued);
        p->running++;
        pthread_mutex_unlock(&p->lock);

        j->run(j);
        terra_job_queue *q = j->queue ? j->queue : &p->own;
        pthread_mutex_lock(&q->lock);
        list_push(&q->done, j); /* from here on the job is its owner's again */
        pthread_mutex_unlock(&q->lock);

        pthread_mutex_lock(&p->lock);
        p->running--;
        pthread_cond_broadcast(&p->idle);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

terra_status terra_pool_create(const terra_pool_desc *desc, terra_pool **out) {
    *out = NULL;
    int n = desc ? desc->threads : 0;
    if (n < 0 || n > 256) return terra_fail(TERRA_E_INVALID, "pool: threads must be from 0 to 256 (got %d)", n);
    if (n == 0) n = terra_default_threads();
    terra_pool *p = terra_calloc(1, sizeof *p);
    if (!p) return terra_fail(TERRA_E_NOMEM, "pool: out of memory");
    p->threads = terra_calloc((size_t)n, sizeof *p->threads);
    if (!p->threads) {
        terra_free(p);
        return terra_fail(TERRA_E_NOMEM, "pool: out of memory");
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->idle, NULL);
    queue_init(&p->own);
    for (int i = 0; i < n; i++) {
        if (pthread_create(&p->threads[i], NULL, worker, p) != 0) {
            p->nthreads = i;
            terra_pool_destroy(p);
            return terra_fail(TERRA_E_NOMEM, "pool: cannot start worker thread %d", i);
        }
    }
    p->nthreads = n;
    *out = p;
    return TERRA_OK;
}

void terra_pool_destroy(terra_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    while (list_pop(&p->queued)) {
    }
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->idle);
    pthread_mutex_destroy(&p->lock);
    pthread_mutex_destroy(&p->own.lock);
    terra_free(p->threads);
    terra_free(p);
}

int terra_pool_threads(const terra_pool *p) { return p->nthreads; }

void terra_pool_submit(terra_pool *p, terra_job *j) {
    pthread_mutex_lock(&p->lock);
    list_push(&p->queued, j);
    pthread_cond_signal(&p->work);
    pthread_mutex_unlock(&p->lock);
}

bool terra_pool_cancel(terra_pool *p, terra_job *j) {
    pthread_mutex_lock(&p->lock);
    bool removed = list_remove(&p->queued, j); /* still queued: it never runs */
    if (removed) pthread_cond_broadcast(&p->idle);
    pthread_mutex_unlock(&p->lock);
    return removed;
}

int terra_pool_poll(terra_pool *p, terra_job **done, int max) { return terra_job_queue_poll(&p->own, done, max); }

void terra_pool_wait_idle(terra_pool *p) {
    pthread_mutex_lock(&p->lock);
    while (p->queued.head || p->running) pthread_cond_wait(&p->idle, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

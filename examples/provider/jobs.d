/*
 * Probes of the example job queue. Build the Go side with
 *   go generate ./examples/provider
 */
#pragma D attributes Evolving/Evolving/Common provider jobs provider

typedef int64_t job_id_t;

provider jobs {
	/* A job entered the queue; depth is the queue length after it. */
	probe job__enqueued(job_id_t id, const char *kind, int32_t depth);
	/* A worker took the job; wait_ns is the time it spent queued. */
	probe job__started(job_id_t id, const char *kind, uint16_t worker, int64_t wait_ns);
	/* The job finished; ok is false when it failed. */
	probe job__done(job_id_t id, const char *kind, int64_t run_ns, bool ok);
};

// SPDX-License-Identifier: GPL-2.0
/*
 * clprobe: congestlab's sampler (docs/probes.md). Loads clprobe.bpf.o through its libbpf
 * skeleton once, and per recording (one repetition) fills the filter maps, opens the output
 * files, attaches, writes what the ring buffer brings as CSV, and detaches again.
 *
 *   clprobe --out DIR [--sock NETNS_INO:PORT:SERVER]... [--queue NETNS_INO:IFINDEX:LINK]...
 *           [--interval-us N] [--max-bytes N] [--bpf-stats]
 *       one recording, until SIGTERM or SIGINT
 *   clprobe --control [--interval-us N] [--bpf-stats]
 *       loads the programs, answers "loaded", then takes recordings from stdin, one line
 *       each: `out DIR`, `max-bytes N`, `sock NETNS_INO:PORT:SERVER`, `queue
 *       NETNS_INO:IFINDEX:LINK`, then `begin` (answers "started" or "error WHY") and `end`
 *       (answers "stopped"). Targets and the output hold for one recording. Ends, ending a
 *       running recording first, at stdin's end, SIGTERM or SIGINT. Loading and verifying
 *       the programs (~30-110 ms of CPU) is paid once, not per repetition.
 *
 * DIR/kernel-probe.csv   one row per tcp_probe / tcp_retransmit_skb event of the sockets
 * DIR/queue-probe.csv    one row per queue sample
 * DIR/clock.jsonl        "start" (after attaching) and "stop" lines: CLOCK_REALTIME and
 *                        CLOCK_MONOTONIC (the BPF clock) read back to back, the recording's
 *                        counts, its CPU and its programs' run time
 *
 * Nothing is pinned: the programs live as long as this process's links, so a killed
 * sampler leaves no BPF program behind; between recordings nothing is attached. With
 * --bpf-stats the kernel's run-time accounting
 * is held on through a BPF_ENABLE_STATS descriptor for this process's lifetime only (the
 * kernel turns it off again when the descriptor closes, also on SIGKILL); the sysctl
 * kernel.bpf_stats_enabled is never written.
 *
 * Exit codes: 0 stopped by a signal, 2 bad arguments, 3 load/attach failed, 4 output failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/types.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "clprobe.h"
#include "clprobe.skel.h"

#define MAX_LABEL 64

static volatile sig_atomic_t stopping;

struct sampler {
	FILE *tcp_csv;
	FILE *queue_csv;
	char socks[CLPROBE_MAX_SOCKS][MAX_LABEL];
	char queues[CLPROBE_MAX_QUEUES][MAX_LABEL];
	unsigned long long max_bytes;
	unsigned long long bytes;
	unsigned long long tcp_rows, queue_rows, truncated;
};

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

static unsigned long long ns_of(const struct timespec *ts)
{
	return (unsigned long long)ts->tv_sec * 1000000000ULL + ts->tv_nsec;
}

/* CLOCK_REALTIME around CLOCK_MONOTONIC, the tightest of 7 tries: the offset between the
 * capture's clock and BPF's, and how long reading it took (its uncertainty). */
static void clock_pair(unsigned long long *realtime_ns, unsigned long long *mono_ns, unsigned long long *read_ns)
{
	unsigned long long best = ~0ULL;

	for (int i = 0; i < 7; i++) {
		struct timespec r1, m, r2;

		clock_gettime(CLOCK_REALTIME, &r1);
		clock_gettime(CLOCK_MONOTONIC, &m);
		clock_gettime(CLOCK_REALTIME, &r2);
		if (ns_of(&r2) - ns_of(&r1) < best) {
			best = ns_of(&r2) - ns_of(&r1);
			*realtime_ns = ns_of(&r1) + best / 2;
			*mono_ns = ns_of(&m);
		}
	}
	*read_ns = best;
}

static void format_addr(char *out, size_t size, __u8 family, const __u32 *addr)
{
	if (family == 4) {
		inet_ntop(AF_INET, addr, out, size);
		return;
	}
	/* a v4-mapped address on a dual-stack socket is an IPv4 connection */
	if (addr[0] == 0 && addr[1] == 0 && addr[2] == htonl(0xffff)) {
		inet_ntop(AF_INET, &addr[3], out, size);
		return;
	}
	inet_ntop(AF_INET6, addr, out, size);
}

static int write_tcp(struct sampler *s, const struct clprobe_tcp_event *e)
{
	static const char *const ca_states[] = {"open", "disorder", "cwr", "recovery", "loss"};
	char saddr[INET6_ADDRSTRLEN], daddr[INET6_ADDRSTRLEN];
	const char *ca = e->ca_state < 5 ? ca_states[e->ca_state] : "other";
	__u8 family = e->family;
	int n;

	if (family == 6 && e->saddr[0] == 0 && e->saddr[1] == 0 && e->saddr[2] == htonl(0xffff))
		family = 4;
	format_addr(saddr, sizeof(saddr), e->family, e->saddr);
	format_addr(daddr, sizeof(daddr), e->family, e->daddr);
	n = fprintf(s->tcp_csv,
		    "%llu,%s,%s,v%u,%s,%u,%s,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%u,%llu,%u,%u,%u,%u,%d,%llu,%s\n",
		    (unsigned long long)e->mono_ns, e->kind == CLPROBE_ACK ? "ack" : "retransmit",
		    s->socks[e->server % CLPROBE_MAX_SOCKS], family, saddr, e->sport, daddr, e->dport, e->snd_cwnd,
		    e->ssthresh, e->mss, e->srtt_us, e->mdev_us, e->rto_us, e->packets_out, e->sacked_out, e->lost_out,
		    e->retrans_out, e->snd_una, e->snd_nxt, (unsigned long long)e->bytes_acked, e->snd_wnd, e->ack_seq,
		    e->seq, e->end_seq, e->err, (unsigned long long)e->pacing_rate, ca);
	if (n < 0)
		return -1;
	s->bytes += n;
	s->tcp_rows++;
	return 0;
}

static int write_queue(struct sampler *s, const struct clprobe_queue_event *e)
{
	int n = fprintf(s->queue_csv, "%llu,%s,%u,%u,%u,%u,%u,%u\n", (unsigned long long)e->mono_ns,
			s->queues[e->queue % CLPROBE_MAX_QUEUES], e->backlog_bytes, e->backlog_pkts,
			e->max_backlog_bytes, e->max_backlog_pkts, e->drops, e->dequeues);

	if (n < 0)
		return -1;
	s->bytes += n;
	s->queue_rows++;
	return 0;
}

static int on_event(void *ctx, void *data, size_t size)
{
	struct sampler *s = ctx;
	__u8 kind = *(const __u8 *)data;

	if (s->max_bytes && s->bytes >= s->max_bytes) {
		s->truncated++;
		return 0;
	}
	if ((kind == CLPROBE_ACK || kind == CLPROBE_RETRANSMIT) && size >= sizeof(struct clprobe_tcp_event) &&
	    s->tcp_csv)
		return write_tcp(s, data);
	if (kind == CLPROBE_QUEUE && size >= sizeof(struct clprobe_queue_event) && s->queue_csv)
		return write_queue(s, data);
	return 0;
}

static void usage(const char *why)
{
	fprintf(stderr, "clprobe: %s\n"
			"usage: clprobe --out DIR [--sock NETNS_INO:PORT:SERVER]... "
			"[--queue NETNS_INO:IFINDEX:LINK]... [--interval-us N] [--max-bytes N] [--bpf-stats]\n",
		why);
	exit(2);
}

/* "A:B:LABEL" with A, B unsigned and LABEL 1..63 characters of [A-Za-z0-9_./-]: NULL, or
 * what is wrong */
static const char *parse_triple(const char *arg, unsigned long *a, unsigned long *b, char *label)
{
	char *end;
	const char *p;

	errno = 0;
	*a = strtoul(arg, &end, 10);
	if (errno || end == arg || *end != ':')
		return "expected NUMBER:NUMBER:LABEL";
	p = end + 1;
	*b = strtoul(p, &end, 10);
	if (errno || end == p || *end != ':')
		return "expected NUMBER:NUMBER:LABEL";
	p = end + 1;
	if (!*p || strlen(p) >= MAX_LABEL || strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
						  "0123456789_./-") != strlen(p))
		return "a label is 1-63 characters of [A-Za-z0-9_./-]";
	strcpy(label, p);
	return NULL;
}

static FILE *open_csv(const char *dir, const char *name, const char *header)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	setvbuf(f, NULL, _IOFBF, 1 << 20);
	fputs(header, f);
	return f;
}

static unsigned long long lost_count(struct clprobe_bpf *skel, __u32 which)
{
	int ncpus = libbpf_num_possible_cpus();
	unsigned long long total = 0;
	__u64 *values;

	if (ncpus <= 0)
		return 0;
	values = calloc(ncpus, sizeof(*values));
	if (values && bpf_map_lookup_elem(bpf_map__fd(skel->maps.lost), &which, values) == 0)
		for (int i = 0; i < ncpus; i++)
			total += values[i];
	free(values);
	return total;
}

/* a recording's counts start from zero: the lost counters and the queues' thinning state */
static void reset_counters(struct clprobe_bpf *skel)
{
	int ncpus = libbpf_num_possible_cpus();
	__u64 *zeros = ncpus > 0 ? calloc(ncpus, sizeof(*zeros)) : NULL;
	char state[64] = {0}; /* struct queue_state is 24 bytes */

	for (__u32 which = 0; zeros && which < 2; which++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.lost), &which, zeros, BPF_ANY);
	free(zeros);
	for (__u32 i = 0; i < CLPROBE_MAX_QUEUES; i++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.queue_states), &i, state, BPF_ANY);
}

static void prog_stats(struct bpf_program *prog, unsigned long long *run_ns, unsigned long long *runs)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_program__fd(prog) >= 0 && bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0) {
		*run_ns += info.run_time_ns;
		*runs += info.run_cnt;
	}
}

/* the kernel's id of a loaded program (0 when not loaded): a test can check it is gone */
static __u32 prog_id(struct bpf_program *prog)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_program__fd(prog) < 0 || bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
		return 0;
	return info.id;
}

static int silent(enum libbpf_print_level level, const char *fmt, va_list args)
{
	return level == LIBBPF_WARN ? vfprintf(stderr, fmt, args) : 0;
}

static double cpu_s(const struct rusage *r, int user, int system)
{
	return (user ? r->ru_utime.tv_sec + r->ru_utime.tv_usec / 1e6 : 0) +
	       (system ? r->ru_stime.tv_sec + r->ru_stime.tv_usec / 1e6 : 0);
}

/* The loaded programs and what the current recording (one repetition) samples and writes. */
struct recorder {
	struct clprobe_bpf *skel;
	struct ring_buffer *rb;
	struct sampler s;
	unsigned long long interval_us;
	int stats_fd;
	double load_cpu_s; /* loading and verifying: paid once per sampler */
	unsigned recordings;
	/* the next (or current) recording */
	char out[3072];
	struct clprobe_sock_key sock_keys[CLPROBE_MAX_SOCKS];
	struct clprobe_queue_key queue_keys[CLPROBE_MAX_QUEUES];
	int nsocks, nqueues;
	const char *bad; /* the first bad configuration line since the last recording */
	/* while recording */
	int active;
	FILE *clock_log;
	struct rusage rusage0;
	unsigned long long run_ns0, runs0;
	char error[3600];
};

static const char *add_target(struct recorder *r, int queue, const char *arg)
{
	unsigned long a, b;
	const char *bad;

	if (queue) {
		if (r->nqueues == CLPROBE_MAX_QUEUES)
			return "too many queues";
		bad = parse_triple(arg, &a, &b, r->s.queues[r->nqueues]);
		if (bad)
			return bad;
		r->queue_keys[r->nqueues].netns_ino = a;
		r->queue_keys[r->nqueues].ifindex = b;
		r->nqueues++;
		return NULL;
	}
	if (r->nsocks == CLPROBE_MAX_SOCKS)
		return "too many sockets";
	bad = parse_triple(arg, &a, &b, r->s.socks[r->nsocks]);
	if (bad)
		return bad;
	if (b == 0 || b > 65535)
		return "a port is 1-65535";
	r->sock_keys[r->nsocks].netns_ino = a;
	r->sock_keys[r->nsocks].port = b;
	r->nsocks++;
	return NULL;
}

static void all_stats(struct recorder *r, unsigned long long *run_ns, unsigned long long *runs)
{
	*run_ns = *runs = 0;
	prog_stats(r->skel->progs.on_tcp_probe, run_ns, runs);
	prog_stats(r->skel->progs.on_tcp_retransmit, run_ns, runs);
	prog_stats(r->skel->progs.on_qdisc_dequeue, run_ns, runs);
}

static void close_outputs(struct recorder *r)
{
	if (r->s.tcp_csv)
		fclose(r->s.tcp_csv);
	if (r->s.queue_csv)
		fclose(r->s.queue_csv);
	if (r->clock_log)
		fclose(r->clock_log);
	r->s.tcp_csv = r->s.queue_csv = r->clock_log = NULL;
}

static void detach(struct recorder *r)
{
	bpf_link__destroy(r->skel->links.on_tcp_probe);
	bpf_link__destroy(r->skel->links.on_tcp_retransmit);
	bpf_link__destroy(r->skel->links.on_qdisc_dequeue);
	r->skel->links.on_tcp_probe = r->skel->links.on_tcp_retransmit = r->skel->links.on_qdisc_dequeue = NULL;
}

static void clear_filters(struct recorder *r)
{
	for (int i = 0; i < r->nsocks; i++)
		bpf_map_delete_elem(bpf_map__fd(r->skel->maps.socks), &r->sock_keys[i]);
	for (int i = 0; i < r->nqueues; i++)
		bpf_map_delete_elem(bpf_map__fd(r->skel->maps.queues), &r->queue_keys[i]);
	r->nsocks = r->nqueues = 0;
}

/* Start a recording: fill the filter maps, open its files, attach, write its start line.
 * 0, or 3 (attach failed) / 4 (output failed) / 2 (bad configuration) with r->error set. */
static int begin_recording(struct recorder *r)
{
	unsigned long long rt0, mono0, read0;
	char path[4096];
	int rc = 0;

	if (r->bad)
		rc = 2, snprintf(r->error, sizeof(r->error), "%s", r->bad);
	else if (!r->out[0])
		rc = 2, snprintf(r->error, sizeof(r->error), "no output directory");
	else if (!r->nsocks && !r->nqueues)
		rc = 2, snprintf(r->error, sizeof(r->error), "nothing to sample: give a socket or a queue");
	if (rc) {
		clear_filters(r);
		r->bad = NULL;
		r->out[0] = 0;
		return rc;
	}
	for (__u8 i = 0; i < r->nsocks; i++)
		bpf_map_update_elem(bpf_map__fd(r->skel->maps.socks), &r->sock_keys[i], &i, BPF_ANY);
	for (__u8 i = 0; i < r->nqueues; i++)
		bpf_map_update_elem(bpf_map__fd(r->skel->maps.queues), &r->queue_keys[i], &i, BPF_ANY);
	reset_counters(r->skel);
	ring_buffer__consume(r->rb); /* nothing of the last recording is left: it was detached */
	r->s.bytes = r->s.tcp_rows = r->s.queue_rows = r->s.truncated = 0;
	if (r->nsocks && !(r->s.tcp_csv = open_csv(r->out, "kernel-probe.csv",
				"mono_ns,event,server,family,saddr,sport,daddr,dport,snd_cwnd,ssthresh,mss,srtt_us,"
				"mdev_us,rto_us,packets_out,sacked_out,lost_out,retrans_out,snd_una,snd_nxt,"
				"bytes_acked,snd_wnd,ack_seq,seq,end_seq,err,pacing_rate,ca_state\n")))
		rc = 4;
	if (!rc && r->nqueues && !(r->s.queue_csv = open_csv(r->out, "queue-probe.csv",
				"mono_ns,link,backlog_bytes,backlog_pkts,max_backlog_bytes,max_backlog_pkts,"
				"drops,dequeues\n")))
		rc = 4;
	snprintf(path, sizeof(path), "%s/clock.jsonl", r->out);
	if (!rc && !(r->clock_log = fopen(path, "w")))
		rc = 4;
	if (rc) {
		snprintf(r->error, sizeof(r->error), "cannot write in %s: %s", r->out, strerror(errno));
		close_outputs(r);
		clear_filters(r);
		r->out[0] = 0;
		return rc;
	}
	all_stats(r, &r->run_ns0, &r->runs0);
	if (r->nsocks) {
		r->skel->links.on_tcp_probe = bpf_program__attach(r->skel->progs.on_tcp_probe);
		r->skel->links.on_tcp_retransmit = bpf_program__attach(r->skel->progs.on_tcp_retransmit);
		if (!r->skel->links.on_tcp_probe || !r->skel->links.on_tcp_retransmit)
			rc = 3;
	}
	if (!rc && r->nqueues) {
		r->skel->links.on_qdisc_dequeue = bpf_program__attach(r->skel->progs.on_qdisc_dequeue);
		if (!r->skel->links.on_qdisc_dequeue)
			rc = 3;
	}
	if (rc) {
		snprintf(r->error, sizeof(r->error), "cannot attach: %s", strerror(errno));
		detach(r);
		close_outputs(r);
		clear_filters(r);
		r->out[0] = 0;
		return rc;
	}
	r->active = 1;
	r->recordings++;
	clock_pair(&rt0, &mono0, &read0);
	getrusage(RUSAGE_SELF, &r->rusage0);
	fprintf(r->clock_log,
		"{\"event\":\"start\",\"realtime_ns\":%llu,\"monotonic_ns\":%llu,\"read_ns\":%llu,\"pid\":%d,"
		"\"recording\":%u,\"socks\":%d,\"queues\":%d,\"interval_us\":%llu,\"bpf_stats\":%s,"
		"\"prog_ids\":[%u,%u,%u],\"cpu_s\":%.6f,\"load_cpu_s\":%.6f}\n",
		rt0, mono0, read0, getpid(), r->recordings, r->nsocks, r->nqueues, r->interval_us,
		r->stats_fd >= 0 ? "true" : "false", prog_id(r->skel->progs.on_tcp_probe),
		prog_id(r->skel->progs.on_tcp_retransmit), prog_id(r->skel->progs.on_qdisc_dequeue),
		cpu_s(&r->rusage0, 1, 1), r->load_cpu_s);
	fflush(r->clock_log);
	return 0;
}

/* End the recording: detach, drain, close its files, write its stop line (its own counts,
 * CPU and BPF run time). 0, or 4 when an output failed. */
static int end_recording(struct recorder *r)
{
	unsigned long long rt1, mono1, read1, run_ns, runs;
	struct rusage rusage;
	int rc = 0;

	if (!r->active)
		return 0;
	clock_pair(&rt1, &mono1, &read1);
	detach(r);
	ring_buffer__consume(r->rb);
	all_stats(r, &run_ns, &runs);
	unsigned long long lost_tcp = lost_count(r->skel, 0), lost_queue = lost_count(r->skel, 1);

	clear_filters(r);
	if ((r->s.tcp_csv && fclose(r->s.tcp_csv)) || (r->s.queue_csv && fclose(r->s.queue_csv)))
		rc = 4;
	r->s.tcp_csv = r->s.queue_csv = NULL;
	getrusage(RUSAGE_SELF, &rusage);
	char run_ns_text[32] = "null", runs_text[32] = "null";

	if (r->stats_fd >= 0) {
		snprintf(run_ns_text, sizeof(run_ns_text), "%llu", run_ns - r->run_ns0);
		snprintf(runs_text, sizeof(runs_text), "%llu", runs - r->runs0);
	}
	fprintf(r->clock_log,
		"{\"event\":\"stop\",\"realtime_ns\":%llu,\"monotonic_ns\":%llu,\"read_ns\":%llu,"
		"\"tcp_rows\":%llu,\"queue_rows\":%llu,\"bytes\":%llu,\"truncated\":%llu,\"lost_tcp\":%llu,"
		"\"lost_queue\":%llu,\"cpu_user_s\":%.6f,\"cpu_system_s\":%.6f,\"cpu_total_s\":%.6f,"
		"\"bpf_run_time_ns\":%s,\"bpf_run_count\":%s}\n",
		rt1, mono1, read1, r->s.tcp_rows, r->s.queue_rows, r->s.bytes, r->s.truncated, lost_tcp, lost_queue,
		cpu_s(&rusage, 1, 0) - cpu_s(&r->rusage0, 1, 0), cpu_s(&rusage, 0, 1) - cpu_s(&r->rusage0, 0, 1),
		cpu_s(&rusage, 1, 1), run_ns_text, runs_text);
	if (fclose(r->clock_log))
		rc = 4;
	r->clock_log = NULL;
	r->active = 0;
	r->out[0] = 0;
	return rc;
}

static void reply(const char *fmt, const char *what)
{
	printf(fmt, what);
	fflush(stdout);
}

/* One control line (docs/probes.md): out PATH | max-bytes N | sock A:B:L | queue A:B:L |
 * begin | end. Configuration lines answer nothing (a bad one fails the next begin); begin
 * answers "started" or "error WHY", end "stopped" or "error WHY". */
static void command(struct recorder *r, char *line)
{
	char *arg = strchr(line, ' ');
	char *end;

	if (arg)
		*arg++ = 0;
	else
		arg = "";
	if (r->active && strcmp(line, "end")) {
		reply("error %s: a recording is running\n", line);
	} else if (!strcmp(line, "out")) {
		snprintf(r->out, sizeof(r->out), "%s", arg);
	} else if (!strcmp(line, "max-bytes")) {
		r->s.max_bytes = strtoull(arg, &end, 10);
		if (!*arg || *end)
			r->bad = r->bad ? r->bad : "max-bytes is a number";
	} else if (!strcmp(line, "sock") || !strcmp(line, "queue")) {
		const char *bad = add_target(r, line[0] == 'q', arg);

		r->bad = r->bad ? r->bad : bad;
	} else if (!strcmp(line, "begin")) {
		if (begin_recording(r))
			reply("error %s\n", r->error);
		else
			reply("%s\n", "started");
	} else if (!strcmp(line, "end")) {
		if (!r->active)
			reply("%s\n", "error end: no recording is running");
		else if (end_recording(r))
			reply("%s\n", "error end: writing the recording failed");
		else
			reply("%s\n", "stopped");
	} else {
		reply("error unknown command %s\n", line);
	}
}

/* Read what arrived on stdin and run every complete line: 0, or -1 at its end. */
static int read_commands(struct recorder *r, char *buf, size_t size, size_t *len)
{
	ssize_t n = read(0, buf + *len, size - 1 - *len);
	char *line, *nl;

	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -1;
	if (n == 0)
		return -1;
	*len += n;
	buf[*len] = 0;
	line = buf;
	while ((nl = strchr(line, '\n'))) {
		*nl = 0;
		command(r, line);
		line = nl + 1;
	}
	*len -= line - buf;
	memmove(buf, line, *len);
	if (*len == size - 1) /* a line longer than the buffer: drop it */
		*len = 0;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"out", required_argument, NULL, 'o'},      {"sock", required_argument, NULL, 's'},
		{"queue", required_argument, NULL, 'q'},    {"interval-us", required_argument, NULL, 'i'},
		{"max-bytes", required_argument, NULL, 'm'}, {"bpf-stats", no_argument, NULL, 'b'},
		{"control", no_argument, NULL, 'c'},        {NULL, 0, NULL, 0},
	};
	static struct recorder r = {.interval_us = 1000, .stats_fd = -1};
	static char lines[16384];
	size_t lines_len = 0;
	int want_stats = 0, control = 0, stdin_open = 1, opt, err, rc = 0;
	struct rusage rusage;
	const char *bad;
	char *end;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'o':
			snprintf(r.out, sizeof(r.out), "%s", optarg);
			break;
		case 's':
		case 'q':
			bad = add_target(&r, opt == 'q', optarg);
			if (bad)
				usage(bad);
			break;
		case 'i':
			r.interval_us = strtoull(optarg, &end, 10);
			if (*end || r.interval_us == 0 || r.interval_us > 1000000)
				usage("--interval-us is 1-1000000");
			break;
		case 'm':
			r.s.max_bytes = strtoull(optarg, &end, 10);
			if (*end)
				usage("--max-bytes is a number");
			break;
		case 'b':
			want_stats = 1;
			break;
		case 'c':
			control = 1;
			break;
		default:
			usage("unknown option");
		}
	}
	if (optind != argc)
		usage("unexpected argument");
	if (control && (r.out[0] || r.nsocks || r.nqueues))
		usage("--control takes its outputs and targets on stdin, not as options");
	if (!control && !r.out[0])
		usage("--out DIR is required (or --control)");
	if (!control && !r.nsocks && !r.nqueues)
		usage("nothing to sample: give --sock or --queue");

	/* the runner that started us may be killed: end with it, and our programs with us */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return 0;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN); /* a runner gone: its stdin's end stops us, not a write */
	libbpf_set_print(silent);

	r.skel = clprobe_bpf__open();
	if (!r.skel) {
		fprintf(stderr, "clprobe: cannot open the BPF object\n");
		return 3;
	}
	r.skel->rodata->interval_ns = r.interval_us * 1000;
	/* a sampler in control mode may record sockets, queues or both: all three are loaded */
	bpf_program__set_autoload(r.skel->progs.on_tcp_probe, control || r.nsocks > 0);
	bpf_program__set_autoload(r.skel->progs.on_tcp_retransmit, control || r.nsocks > 0);
	bpf_program__set_autoload(r.skel->progs.on_qdisc_dequeue, control || r.nqueues > 0);
	err = clprobe_bpf__load(r.skel);
	if (err) {
		fprintf(stderr, "clprobe: cannot load the BPF programs: %s\n", strerror(-err));
		clprobe_bpf__destroy(r.skel);
		return 3;
	}
	r.rb = ring_buffer__new(bpf_map__fd(r.skel->maps.events), on_event, &r.s, NULL);
	if (!r.rb) {
		fprintf(stderr, "clprobe: cannot open the ring buffer\n");
		clprobe_bpf__destroy(r.skel);
		return 3;
	}
	if (want_stats) {
		r.stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (r.stats_fd < 0)
			fprintf(stderr, "clprobe: --bpf-stats: BPF_ENABLE_STATS failed: %s\n", strerror(errno));
	}
	getrusage(RUSAGE_SELF, &rusage);
	r.load_cpu_s = cpu_s(&rusage, 1, 1);
	if (control) {
		reply("%s\n", "loaded");
	} else {
		rc = begin_recording(&r);
		if (rc) {
			fprintf(stderr, "clprobe: %s\n", r.error);
			stopping = 1;
		}
	}

	while (!stopping) {
		struct pollfd fds[2] = {{.fd = ring_buffer__epoll_fd(r.rb), .events = POLLIN},
					{.fd = 0, .events = POLLIN}};
		int n = poll(fds, control && stdin_open ? 2 : 1, 100);

		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "clprobe: poll: %s\n", strerror(errno));
			rc = 4;
			break;
		}
		err = ring_buffer__consume(r.rb); /* what arrived, woken or not */
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "clprobe: ring buffer: %s\n", strerror(-err));
			rc = 4;
			break;
		}
		if (n > 0 && control && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    read_commands(&r, lines, sizeof(lines), &lines_len) < 0)
			break; /* the runner closed our stdin: we are done */
	}
	if (end_recording(&r))
		rc = 4;
	ring_buffer__free(r.rb);
	clprobe_bpf__destroy(r.skel); /* detaches: nothing of ours stays in the kernel */
	if (r.stats_fd >= 0)
		close(r.stats_fd);
	return rc;
}

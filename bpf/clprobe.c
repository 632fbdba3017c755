// SPDX-License-Identifier: GPL-2.0
/*
 * clprobe: congestlab's sampler (docs/probes.md). Loads clprobe.bpf.o through its libbpf
 * skeleton, fills the filter maps, attaches, and writes what the ring buffer brings as CSV
 * until SIGTERM or SIGINT, then drains and detaches.
 *
 *   clprobe --out DIR [--sock NETNS_INO:PORT:SERVER]... [--queue NETNS_INO:IFINDEX:LINK]...
 *           [--interval-us N] [--max-bytes N] [--bpf-stats]
 *
 * DIR/kernel-probe.csv   one row per tcp_probe / tcp_retransmit_skb event of the sockets
 * DIR/queue-probe.csv    one row per queue sample
 * DIR/clock.jsonl        "start" (after attaching) and "stop" lines: CLOCK_REALTIME and
 *                        CLOCK_MONOTONIC (the BPF clock) read back to back, counts, CPU
 *
 * Nothing is pinned: the programs live as long as this process's links, so a killed
 * sampler leaves no BPF program behind. With --bpf-stats the kernel's run-time accounting
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

/* "A:B:LABEL" with A, B unsigned and LABEL 1..63 characters of [A-Za-z0-9_./-] */
static void parse_triple(const char *arg, unsigned long *a, unsigned long *b, char *label)
{
	char *end;
	const char *p;

	errno = 0;
	*a = strtoul(arg, &end, 10);
	if (errno || end == arg || *end != ':')
		usage("expected NUMBER:NUMBER:LABEL");
	p = end + 1;
	*b = strtoul(p, &end, 10);
	if (errno || end == p || *end != ':')
		usage("expected NUMBER:NUMBER:LABEL");
	p = end + 1;
	if (!*p || strlen(p) >= MAX_LABEL || strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
						  "0123456789_./-") != strlen(p))
		usage("a label is 1-63 characters of [A-Za-z0-9_./-]");
	strcpy(label, p);
}

static FILE *open_csv(const char *dir, const char *name, const char *header)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	if (!f) {
		fprintf(stderr, "clprobe: cannot write %s: %s\n", path, strerror(errno));
		exit(4);
	}
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

static void prog_stats(struct bpf_program *prog, unsigned long long *run_ns, unsigned long long *runs)
{
	struct bpf_prog_info info;
	__u32 len = sizeof(info);

	memset(&info, 0, sizeof(info));
	if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len) == 0) {
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

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"out", required_argument, NULL, 'o'},      {"sock", required_argument, NULL, 's'},
		{"queue", required_argument, NULL, 'q'},    {"interval-us", required_argument, NULL, 'i'},
		{"max-bytes", required_argument, NULL, 'm'}, {"bpf-stats", no_argument, NULL, 'b'},
		{NULL, 0, NULL, 0},
	};
	struct clprobe_sock_key sock_keys[CLPROBE_MAX_SOCKS];
	struct clprobe_queue_key queue_keys[CLPROBE_MAX_QUEUES];
	struct sampler s = {0};
	struct clprobe_bpf *skel;
	struct ring_buffer *rb;
	unsigned long long interval_us = 1000, rt0, mono0, read0, rt1, mono1, read1, run_ns = 0, runs = 0;
	unsigned long a, b;
	int nsocks = 0, nqueues = 0, stats_fd = -1, want_stats = 0, opt, err, rc = 0;
	const char *out = NULL;
	char path[4096];
	struct rusage rusage;
	FILE *clock_log;
	char *end;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 's':
			if (nsocks == CLPROBE_MAX_SOCKS)
				usage("too many --sock");
			parse_triple(optarg, &a, &b, s.socks[nsocks]);
			if (b == 0 || b > 65535)
				usage("a port is 1-65535");
			sock_keys[nsocks].netns_ino = a;
			sock_keys[nsocks].port = b;
			nsocks++;
			break;
		case 'q':
			if (nqueues == CLPROBE_MAX_QUEUES)
				usage("too many --queue");
			parse_triple(optarg, &a, &b, s.queues[nqueues]);
			queue_keys[nqueues].netns_ino = a;
			queue_keys[nqueues].ifindex = b;
			nqueues++;
			break;
		case 'i':
			interval_us = strtoull(optarg, &end, 10);
			if (*end || interval_us == 0 || interval_us > 1000000)
				usage("--interval-us is 1-1000000");
			break;
		case 'm':
			s.max_bytes = strtoull(optarg, &end, 10);
			if (*end)
				usage("--max-bytes is a number");
			break;
		case 'b':
			want_stats = 1;
			break;
		default:
			usage("unknown option");
		}
	}
	if (!out || optind != argc)
		usage("--out DIR is required and nothing else");
	if (!nsocks && !nqueues)
		usage("nothing to sample: give --sock or --queue");

	/* the runner that started us may be killed: end with it, and our programs with us */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		return 0;
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	libbpf_set_print(silent);

	skel = clprobe_bpf__open();
	if (!skel) {
		fprintf(stderr, "clprobe: cannot open the BPF object\n");
		return 3;
	}
	skel->rodata->interval_ns = interval_us * 1000;
	bpf_program__set_autoload(skel->progs.on_tcp_probe, nsocks > 0);
	bpf_program__set_autoload(skel->progs.on_tcp_retransmit, nsocks > 0);
	bpf_program__set_autoload(skel->progs.on_qdisc_dequeue, nqueues > 0);
	err = clprobe_bpf__load(skel);
	if (err) {
		fprintf(stderr, "clprobe: cannot load the BPF programs: %s\n", strerror(-err));
		clprobe_bpf__destroy(skel);
		return 3;
	}
	for (__u8 i = 0; i < nsocks; i++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.socks), &sock_keys[i], &i, BPF_ANY);
	for (__u8 i = 0; i < nqueues; i++)
		bpf_map_update_elem(bpf_map__fd(skel->maps.queues), &queue_keys[i], &i, BPF_ANY);

	if (nsocks)
		s.tcp_csv = open_csv(out, "kernel-probe.csv",
				     "mono_ns,event,server,family,saddr,sport,daddr,dport,snd_cwnd,ssthresh,mss,srtt_us,"
				     "mdev_us,rto_us,packets_out,sacked_out,lost_out,retrans_out,snd_una,snd_nxt,"
				     "bytes_acked,snd_wnd,ack_seq,seq,end_seq,err,pacing_rate,ca_state\n");
	if (nqueues)
		s.queue_csv = open_csv(out, "queue-probe.csv",
				       "mono_ns,link,backlog_bytes,backlog_pkts,max_backlog_bytes,max_backlog_pkts,"
				       "drops,dequeues\n");
	snprintf(path, sizeof(path), "%s/clock.jsonl", out);
	clock_log = fopen(path, "w");
	if (!clock_log) {
		fprintf(stderr, "clprobe: cannot write %s: %s\n", path, strerror(errno));
		clprobe_bpf__destroy(skel);
		return 4;
	}
	rb = ring_buffer__new(bpf_map__fd(skel->maps.events), on_event, &s, NULL);
	if (!rb) {
		fprintf(stderr, "clprobe: cannot open the ring buffer\n");
		clprobe_bpf__destroy(skel);
		return 3;
	}
	if (want_stats) {
		stats_fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
		if (stats_fd < 0)
			fprintf(stderr, "clprobe: --bpf-stats: BPF_ENABLE_STATS failed: %s\n", strerror(errno));
	}
	err = clprobe_bpf__attach(skel);
	if (err) {
		fprintf(stderr, "clprobe: cannot attach: %s\n", strerror(-err));
		ring_buffer__free(rb);
		clprobe_bpf__destroy(skel);
		return 3;
	}
	clock_pair(&rt0, &mono0, &read0);
	getrusage(RUSAGE_SELF, &rusage); /* loading and verifying: paid once per repetition */
	fprintf(clock_log,
		"{\"event\":\"start\",\"realtime_ns\":%llu,\"monotonic_ns\":%llu,\"read_ns\":%llu,\"pid\":%d,"
		"\"socks\":%d,\"queues\":%d,\"interval_us\":%llu,\"bpf_stats\":%s,\"prog_ids\":[%u,%u,%u],"
		"\"cpu_s\":%.6f}\n",
		rt0, mono0, read0, getpid(), nsocks, nqueues, interval_us, stats_fd >= 0 ? "true" : "false",
		prog_id(skel->progs.on_tcp_probe), prog_id(skel->progs.on_tcp_retransmit),
		prog_id(skel->progs.on_qdisc_dequeue),
		rusage.ru_utime.tv_sec + rusage.ru_utime.tv_usec / 1e6 + rusage.ru_stime.tv_sec + rusage.ru_stime.tv_usec / 1e6);
	fflush(clock_log);

	while (!stopping) {
		err = ring_buffer__poll(rb, 100);
		if (err >= 0)
			err = ring_buffer__consume(rb); /* what arrived without a wake-up */
		if (err < 0 && err != -EINTR) {
			fprintf(stderr, "clprobe: ring buffer: %s\n", strerror(-err));
			rc = 4;
			break;
		}
	}
	clock_pair(&rt1, &mono1, &read1);
	ring_buffer__consume(rb);
	if (stats_fd >= 0) {
		if (nsocks) {
			prog_stats(skel->progs.on_tcp_probe, &run_ns, &runs);
			prog_stats(skel->progs.on_tcp_retransmit, &run_ns, &runs);
		}
		if (nqueues)
			prog_stats(skel->progs.on_qdisc_dequeue, &run_ns, &runs);
	}
	unsigned long long lost_tcp = lost_count(skel, 0), lost_queue = lost_count(skel, 1);

	ring_buffer__free(rb);
	clprobe_bpf__destroy(skel); /* detaches: nothing of ours stays in the kernel */
	if (stats_fd >= 0)
		close(stats_fd);
	if ((s.tcp_csv && fclose(s.tcp_csv)) || (s.queue_csv && fclose(s.queue_csv)))
		rc = 4;
	getrusage(RUSAGE_SELF, &rusage);
	char run_ns_text[32] = "null", runs_text[32] = "null";

	if (stats_fd >= 0) {
		snprintf(run_ns_text, sizeof(run_ns_text), "%llu", run_ns);
		snprintf(runs_text, sizeof(runs_text), "%llu", runs);
	}
	fprintf(clock_log,
		"{\"event\":\"stop\",\"realtime_ns\":%llu,\"monotonic_ns\":%llu,\"read_ns\":%llu,"
		"\"tcp_rows\":%llu,\"queue_rows\":%llu,\"bytes\":%llu,\"truncated\":%llu,\"lost_tcp\":%llu,"
		"\"lost_queue\":%llu,\"cpu_user_s\":%.6f,\"cpu_system_s\":%.6f,\"bpf_run_time_ns\":%s,"
		"\"bpf_run_count\":%s}\n",
		rt1, mono1, read1, s.tcp_rows, s.queue_rows, s.bytes, s.truncated, lost_tcp, lost_queue,
		rusage.ru_utime.tv_sec + rusage.ru_utime.tv_usec / 1e6, rusage.ru_stime.tv_sec + rusage.ru_stime.tv_usec / 1e6,
		run_ns_text, runs_text);
	if (fclose(clock_log))
		rc = 4;
	return rc;
}

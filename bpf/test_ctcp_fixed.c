// SPDX-License-Identifier: GPL-2.0
/*
 * User-space harness: runs the fixed-point arithmetic of ctcp.bpf.c (the
 * shared ctcp_fixed.h) against double-precision references of
 * draft-sridharan-tcpm-ctcp-02 and fails (exit 1) on any error above bound.
 */
#include <linux/types.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ctcp_fixed.h"

static int failures;

#define CHECK(cond, ...)                                    \
	do {                                                    \
		if (!(cond)) {                                      \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                   \
			fprintf(stderr, "\n");                          \
			failures++;                                     \
		}                                                   \
	} while (0)

static double q16(__u64 v) { return (double)v / 65536.0; }

/* isqrt must be exact floor(sqrt(x)) over the whole domain it is used on. */
static void test_isqrt(void)
{
	__u64 x;
	int n = 0;

	for (x = 0; x < 70000; x++, n++)
		CHECK(ctcp_isqrt62(x) == (__u64)floor(sqrtl((long double)x)), "isqrt(%llu)", (unsigned long long)x);
	for (x = 1; x < (1ULL << 62); x = x * 3 + 7, n++) {
		__u64 r = ctcp_isqrt62(x);
		CHECK(r * r <= x && (r + 1) * (r + 1) > x, "isqrt(%llu) = %llu", (unsigned long long)x, (unsigned long long)r);
	}
	printf("isqrt: %d values exact\n", n);
}

/* win^0.75 over every window 1 .. 2^20 packets. */
static void test_pow34(void)
{
	double worst_rel = 0, worst_abs = 0;
	__u32 w;

	for (w = 1; w <= CTCP_MAX_WIN_PKTS; w++) {
		double ref = pow((double)w, 0.75);
		double got = q16(ctcp_pow34_q16(w));
		double abs_err = fabs(got - ref);
		double rel = abs_err / ref;

		if (rel > worst_rel)
			worst_rel = rel;
		if (abs_err > worst_abs)
			worst_abs = abs_err;
	}
	CHECK(worst_rel < 1e-4, "pow34 worst relative error %.3g", worst_rel);
	CHECK(worst_abs < 1e-2, "pow34 worst absolute error %.3g", worst_abs);
	CHECK(ctcp_pow34_q16(CTCP_MAX_WIN_PKTS + 5) == ctcp_pow34_q16(CTCP_MAX_WIN_PKTS), "clamp above max window");
	printf("win^0.75: windows 1..%u, worst relative error %.2e, worst absolute %.2e packets\n",
	       CTCP_MAX_WIN_PKTS, worst_rel, worst_abs);
}

static double ref_diff(double win, double rtt, double base)
{
	return rtt > base ? win * (rtt - base) / rtt : 0.0;
}

static void test_diff(void)
{
	double worst = 0;
	__u32 win, rtt;

	for (win = 1; win < 200000; win = win * 5 / 4 + 1)
		for (rtt = 50; rtt < 5000000; rtt = rtt * 3 / 2 + 1) {
			__u32 base = rtt / 3 + 17;
			double err = fabs(q16(ctcp_diff_q16(win, rtt, base)) - ref_diff(win, rtt, base));

			if (err > worst)
				worst = err;
		}
	CHECK(worst < 1.0 / 65536 * 2, "diff worst absolute error %.3g packets", worst);
	CHECK(ctcp_diff_q16(100, 0, 0) == 0, "rtt 0 gives no diff");
	CHECK(ctcp_diff_q16(100, 500, 900) == 0, "rtt below base gives no diff");
	printf("diff: worst absolute error %.2e packets\n", worst);
}

/* Round by round: growth and shrink against the double formula, and a whole
 * trajectory (queue building as win grows) so rounding errors cannot add up. */
static void test_rounds(void)
{
	double worst_step = 0, worst_traj = 0;
	__u64 dwnd_q = 0;
	double dwnd_d = 0;
	int grew, round, grow_rounds = 0, shrink_rounds = 0;
	__u32 w;

	for (w = 1; w < 100000; w += 7) {
		double ref = fmax(0.125 * pow(w, 0.75) - 1.0, 0.0);
		double got = q16(ctcp_dwnd_increase_q16(w));

		if (fabs(got - ref) > worst_step)
			worst_step = fabs(got - ref);
	}
	CHECK(worst_step < 2e-3, "increase per round worst error %.3g", worst_step);
	printf("dwnd growth per round: worst absolute error %.2e packets\n", worst_step);

	/* 200-packet pipe, base RTT 20 ms, cwnd fixed at 150, queue = win - 200.
	 * Both accumulators see the same win and RTT (from the reference), so a
	 * drift between them is rounding adding up, not the gamma threshold
	 * amplifying a tiny difference into another branch. */
	for (round = 0; round < 400; round++) {
		const double cwnd = 150, pipe = 200, base_us = 20000;
		double win = cwnd + floor(dwnd_d);
		__u32 rtt_us = (__u32)(base_us * (1 + fmax(win - pipe, 0) / pipe));
		double diff_d = ref_diff(win, rtt_us, base_us);
		__u64 diff_q = ctcp_diff_q16((__u32)win, rtt_us, (__u32)base_us);

		if (diff_d < 30)
			dwnd_d += fmax(0.125 * pow(win, 0.75) - 1, 0);
		else
			dwnd_d = fmax(dwnd_d - diff_d, 0);
		dwnd_q = ctcp_dwnd_round_q16(dwnd_q, (__u32)win, diff_q, &grew);
		CHECK(grew == (diff_d < 30), "round %d: branch differs at diff %.6f", round, diff_d);
		grow_rounds += grew;
		shrink_rounds += !grew;
		if (fabs(q16(dwnd_q) - dwnd_d) > worst_traj)
			worst_traj = fabs(q16(dwnd_q) - dwnd_d);
	}
	CHECK(worst_traj < 0.01, "trajectory drifted %.3g packets", worst_traj);
	CHECK(grow_rounds > 0 && shrink_rounds > 0, "trajectory has both growth (%d) and shrink (%d)", grow_rounds, shrink_rounds);
	printf("400-round trajectory: %d grow, %d shrink rounds, worst |dwnd - reference| %.2e packets\n",
	       grow_rounds, shrink_rounds, worst_traj);

	/* Shrink: exactly zeta * diff, floored at zero. */
	dwnd_q = ctcp_dwnd_round_q16(40ULL << 16, 100, 35ULL << 16, &grew);
	CHECK(!grew && dwnd_q == (5ULL << 16), "shrink 40 - 35 = %.3f", q16(dwnd_q));
	dwnd_q = ctcp_dwnd_round_q16(10ULL << 16, 100, 35ULL << 16, &grew);
	CHECK(!grew && dwnd_q == 0, "shrink floors at zero");
	/* gamma boundary: diff == gamma shrinks, just below grows. */
	ctcp_dwnd_round_q16(0, 100, 30ULL << 16, &grew);
	CHECK(!grew, "diff == gamma shrinks");
	ctcp_dwnd_round_q16(0, 100, (30ULL << 16) - 1, &grew);
	CHECK(grew, "diff just below gamma grows");
}

static void test_loss(void)
{
	__u32 cwnd;
	double worst = 0;

	for (cwnd = 2; cwnd < 50000; cwnd = cwnd * 3 / 2 + 1) {
		double dwnd;

		for (dwnd = 0; dwnd < 3 * cwnd; dwnd += cwnd / 3.0 + 0.37) {
			__u64 dq = (__u64)llround(dwnd * 65536);
			double ref = fmax((cwnd + q16(dq)) * 0.5 - cwnd / 2.0, 0);
			double err = fabs(q16(ctcp_dwnd_after_loss_q16(cwnd, dq)) - ref);

			if (err > worst)
				worst = err;
		}
	}
	CHECK(worst < 1e-4, "loss rule worst error %.3g", worst);
	printf("loss rule max(win*(1-beta) - cwnd/2, 0): worst absolute error %.2e packets\n", worst);
}

/*
 * Test vectors shared with leantcp (crates/leantcp/src/cc/compound.rs): an ACK sequence
 * and the Compound state after it, from a C restatement of ctcp.bpf.c's hooks (the
 * per-ACK glue: pkts_acked, cong_avoid, ssthresh, set_state(Loss)) over ctcp_fixed.h,
 * the arithmetic the kernel runs. `test_ctcp_fixed --vectors` prints them; `make test`
 * checks ctcp_vectors.txt is current and the leantcp tests replay it (`make vectors`).
 *
 * The sender is always cwnd-limited: after each one-packet ACK it fills the window
 * (nxt = max(nxt, una + win)). The path: a pipe with a 20 ms base RTT and a queue
 * (print_vectors); an ACK's RTT sample is base * (1 + max(win - pipe, 0) / pipe); a
 * window above pipe + queue loses a packet (a fast retransmit: the ssthresh hook, then
 * recovery ends at the new window, which D7's resync leaves as split). The second loss
 * is a timeout instead (ssthresh hook, set_state(Loss), the kernel's window of 1).
 */
#define CTCP_MIN_CWND_PKTS 2     /* ctcp.bpf.c CTCP_MIN_CWND */

struct model {
	__u64 dwnd_q16, saved_dwnd_q16;
	__u32 cwnd, cwnd_cnt, saved_cwnd, base_rtt_us, rtt_sum_us, rtt_cnt;
	__u32 round_end, slow_start, ssthresh;
	int round_restart;        /* start_round at the next ACK (after a timeout) */
};

static __u32 model_win(const struct model *m)
{
	return m->cwnd + (__u32)(m->dwnd_q16 >> CTCP_Q16_SHIFT);
}

/* ctcp.bpf.c end_round() without the counters. */
static void model_end_round(struct model *m)
{
	__u32 win = model_win(m), rtt_us;
	__u64 diff_q16;
	int grew;

	if (m->rtt_cnt == 0)
		return;
	rtt_us = m->rtt_sum_us / m->rtt_cnt;
	diff_q16 = ctcp_diff_q16(win, rtt_us, m->base_rtt_us);
	if (win >= CTCP_LOW_WND_PKTS || diff_q16 >= ((__u64)CTCP_GAMMA_PKTS << CTCP_Q16_SHIFT))
		m->dwnd_q16 = ctcp_dwnd_round_q16(m->dwnd_q16, win, diff_q16, &grew);
}

static void model_start_round(struct model *m, __u32 nxt)
{
	m->round_end = nxt;
	m->rtt_sum_us = 0;
	m->rtt_cnt = 0;
}

/* pkts_acked + cong_avoid of one ACK of one packet; `nxt` is snd_nxt before the
 * sender refills the window. */
static void model_ack(struct model *m, __u32 ack, __u32 nxt, __u32 rtt_us)
{
	__u32 acked = 1;
	int round_over;

	if (rtt_us < m->base_rtt_us)
		m->base_rtt_us = rtt_us;
	if (m->rtt_sum_us < 0x7fffffff - rtt_us) {
		m->rtt_sum_us += rtt_us;
		m->rtt_cnt++;
	}
	round_over = m->round_restart || (__s32)(ack - m->round_end) > 0;
	m->round_restart = 0;
	if (m->slow_start) {
		__u32 grown = m->cwnd + acked < m->ssthresh ? m->cwnd + acked : m->ssthresh;

		acked -= grown - m->cwnd;        /* tcp_slow_start() */
		m->cwnd = grown;
		m->dwnd_q16 = 0;
		if (m->cwnd >= m->ssthresh)
			m->slow_start = 0;
		if (round_over)
			model_start_round(m, nxt);
		if (!acked)
			return;
		round_over = 0;
	}
	m->cwnd_cnt += acked;
	if (m->cwnd_cnt >= model_win(m)) {
		__u32 inc = m->cwnd_cnt / model_win(m);

		m->cwnd_cnt -= inc * model_win(m);
		m->cwnd += inc;
	}
	if (round_over) {
		model_end_round(m);
		model_start_round(m, nxt);
	}
	if (!m->slow_start && m->ssthresh > model_win(m))   /* apply_win(), D10 */
		m->ssthresh = model_win(m);
}

/* The ssthresh hook (D6). */
static void model_loss(struct model *m)
{
	__u32 half = m->cwnd >> 1, win;

	m->saved_cwnd = m->cwnd;
	m->saved_dwnd_q16 = m->dwnd_q16;
	m->dwnd_q16 = ctcp_dwnd_after_loss_q16(m->cwnd, m->dwnd_q16);
	m->cwnd = half > CTCP_MIN_CWND_PKTS ? half : CTCP_MIN_CWND_PKTS;
	m->cwnd_cnt = 0;
	m->slow_start = 0;
	win = model_win(m);
	m->ssthresh = win > CTCP_MIN_CWND_PKTS ? win : CTCP_MIN_CWND_PKTS;
}

/* A timeout: the ssthresh hook, set_state(Loss) (D8), then resync (D7) to the
 * kernel's window of one packet. */
static void model_rto(struct model *m)
{
	model_loss(m);
	m->dwnd_q16 = 0;
	m->slow_start = 1;
	m->round_restart = 1;
	m->cwnd = 1;
}

static void print_state(const char *what, const struct model *m)
{
	printf("%s %u %llu %u %u\n", what, m->cwnd, (unsigned long long)m->dwnd_q16, model_win(m), m->ssthresh);
}

static void print_scenario(__u32 pipe, __u32 queue, __u32 total_acks)
{
	const __u32 base_us = 20000;
	struct model m = { .cwnd = 10, .base_rtt_us = 0xffffffff, .ssthresh = 0x7fffffff, .slow_start = 1 };
	__u32 una = 0, nxt = 10, i, batch = 0, batch_rtt = 0, losses = 0;
	__u64 last_dwnd = 0;

	printf("scenario %u %u %u\n", pipe, queue, total_acks);
	model_start_round(&m, nxt);
	for (i = 0; i < total_acks; i++) {
		__u32 win = model_win(&m);
		__u32 rtt = base_us + (win > pipe ? base_us * (win - pipe) / pipe : 0);

		if (win > pipe + queue) {
			if (batch)
				printf("ack %u %u %u %llu %u %u\n", batch, batch_rtt, m.cwnd,
				       (unsigned long long)m.dwnd_q16, model_win(&m), m.ssthresh);
			batch = 0;
			if (++losses == 2) {
				model_rto(&m);
				nxt = una;
				print_state("rto", &m);
			} else {
				model_loss(&m);
				print_state("loss", &m);
			}
			win = model_win(&m);
			rtt = base_us + (win > pipe ? base_us * (win - pipe) / pipe : 0);
		}
		if (batch && rtt != batch_rtt) {
			printf("ack %u %u %u %llu %u %u\n", batch, batch_rtt, m.cwnd,
			       (unsigned long long)m.dwnd_q16, model_win(&m), m.ssthresh);
			batch = 0;
		}
		una++;
		if ((__s32)(nxt - una) < 0)
			nxt = una;
		model_ack(&m, una, nxt, rtt);
		batch++;
		batch_rtt = rtt;
		if (una + model_win(&m) > nxt)
			nxt = una + model_win(&m);
		if (m.dwnd_q16 != last_dwnd) {   /* a round changed dwnd: check it there */
			printf("ack %u %u %u %llu %u %u\n", batch, batch_rtt, m.cwnd,
			       (unsigned long long)m.dwnd_q16, model_win(&m), m.ssthresh);
			batch = 0;
			last_dwnd = m.dwnd_q16;
		}
	}
	if (batch)
		printf("ack %u %u %u %llu %u %u\n", batch, batch_rtt, m.cwnd, (unsigned long long)m.dwnd_q16,
		       model_win(&m), m.ssthresh);
}

/* A 200-packet pipe (windows far above low_wnd) and a 30-packet one (windows around
 * low_wnd = 41, so D2's rule decides). */
static void print_vectors(void)
{
	printf("# Compound TCP test vectors: see bpf/test_ctcp_fixed.c print_vectors().\n");
	printf("# scenario PIPE QUEUE ACKS: a new connection on a path of PIPE packets + QUEUE.\n");
	printf("# ack COUNT RTT_US CWND DWND_Q16 WIN SSTHRESH: COUNT one-packet ACKs, each with this RTT\n");
	printf("#   sample (the sender refills its window after each), then the state after the last.\n");
	printf("# loss CWND DWND_Q16 WIN SSTHRESH: a fast retransmit (the ssthresh hook), state after.\n");
	printf("# rto CWND DWND_Q16 WIN SSTHRESH: a retransmission timeout, state after.\n");
	print_scenario(200, 40, 60000);
	print_scenario(30, 25, 8000);
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "--vectors") == 0) {
		print_vectors();
		return 0;
	}
	test_isqrt();
	test_pow34();
	test_diff();
	test_rounds();
	test_loss();
	if (failures) {
		fprintf(stderr, "test_ctcp_fixed: %d failures\n", failures);
		return 1;
	}
	printf("test_ctcp_fixed: all checks passed\n");
	return 0;
}

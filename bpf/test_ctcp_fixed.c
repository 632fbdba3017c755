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

int main(void)
{
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

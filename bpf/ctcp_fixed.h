/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fixed-point arithmetic of Compound TCP (draft-sridharan-tcpm-ctcp-02),
 * shared by the BPF program (ctcp.bpf.c) and the user-space test harness
 * (test_ctcp_fixed.c), so the harness checks the very code the kernel runs.
 *
 * Rules this header keeps, because the BPF verifier enforces them:
 *  - no floating point: every fraction is Q16 (value * 65536) in a __u64;
 *  - no data-dependent loop trip counts and no data-dependent branch inside a
 *    loop: the square root is a fixed 32-step loop whose per-step choice is a
 *    mask computed arithmetically (BPF has no conditional move).
 * The includer provides __u32/__u64 (vmlinux.h in BPF, <linux/types.h> in C).
 */
#ifndef CTCP_FIXED_H
#define CTCP_FIXED_H

#define CTCP_INLINE static inline __attribute__((always_inline))

#define CTCP_Q16_SHIFT 16
#define CTCP_Q16_ONE (1ULL << CTCP_Q16_SHIFT)

/* Parameters of the draft (section 3): alpha = 1/8, beta = 1/2, k = 3/4,
 * gamma = 30 packets, zeta = 1, low window = 41 packets. */
#define CTCP_ALPHA_SHIFT 3          /* alpha = 1 / 2^3 */
#define CTCP_GAMMA_PKTS 30
#define CTCP_ZETA_Q16 CTCP_Q16_ONE  /* zeta = 1 */
#define CTCP_LOW_WND_PKTS 41

/* Windows above this are clamped before the power law: keeps w^1.5 << 16 in 64 bits. */
#define CTCP_MAX_WIN_PKTS (1U << 20)
/* RTT differences above 2^24 us (16.7 s) are clamped: keeps win * drtt << 16 in 64 bits. */
#define CTCP_MAX_DRTT_US (1U << 24)

/* Hides a value from the optimizer: without it clang turns the arithmetic
 * selects below back into branches (2^31 verifier paths per square root). */
#define CTCP_OPAQUE(v) __asm__ __volatile__("" : "+r"(v))

/* 1 if a >= b else 0, without a branch; valid for a, b < 2^63. */
CTCP_INLINE __u64 ctcp_ge_mask01(__u64 a, __u64 b)
{
	return 1 - ((a - b) >> 63);
}

/* floor(sqrt(x)) for x < 2^62: classic digit-by-digit method, 31 fixed steps,
 * each step selects with an arithmetic mask instead of a branch. */
CTCP_INLINE __u64 ctcp_isqrt62(__u64 x)
{
	__u64 res = 0;
	__u64 bit = 1ULL << 60;
	int i;

#ifdef __clang__
#pragma unroll
#endif
	for (i = 0; i < 31; i++) {
		__u64 trial = res + bit;
		__u64 take = ctcp_ge_mask01(x, trial);   /* 1: subtract this digit */
		__u64 mask = 0 - take;                   /* all ones or zero */

		CTCP_OPAQUE(mask);

		x -= trial & mask;
		res = (res >> 1) + (bit & mask);
		bit >>= 2;
	}
	return res;
}

/* w^(3/4) in Q16 for a window w in packets: sqrt(w * sqrt(w)), computed as
 * isqrt(w * isqrt(w << 32) << 16) so both roots keep 16 fractional bits. */
CTCP_INLINE __u64 ctcp_pow34_q16(__u32 win_pkts)
{
	__u64 w = win_pkts;
	__u64 sqrt_w_q16;

	if (w > CTCP_MAX_WIN_PKTS)
		w = CTCP_MAX_WIN_PKTS;
	sqrt_w_q16 = ctcp_isqrt62(w << 32);          /* sqrt(w) * 2^16, w << 32 <= 2^52 */
	return ctcp_isqrt62((w * sqrt_w_q16) << 16); /* (w^1.5 * 2^32)^(1/2) <= 2^62 */
}

/* The BPF program routes the power law through a global (separately verified)
 * function so the verifier walks its ~400 instructions once, not once per path. */
#ifndef CTCP_POW34_Q16
#define CTCP_POW34_Q16 ctcp_pow34_q16
#endif

/* Per-round increase of dwnd when diff < gamma: max(alpha * win^k - 1, 0), Q16. */
CTCP_INLINE __u64 ctcp_dwnd_increase_q16(__u32 win_pkts)
{
	__u64 grow = CTCP_POW34_Q16(win_pkts) >> CTCP_ALPHA_SHIFT;

	return grow > CTCP_Q16_ONE ? grow - CTCP_Q16_ONE : 0;
}

/* diff = win * (rtt - base_rtt) / rtt in packets, Q16 (the draft's
 * (expected - actual) * baseRTT, i.e. the packets this flow keeps queued). */
CTCP_INLINE __u64 ctcp_diff_q16(__u32 win_pkts, __u32 rtt_us, __u32 base_rtt_us)
{
	__u64 w = win_pkts;
	__u64 drtt;

	if (rtt_us == 0 || rtt_us <= base_rtt_us)
		return 0;
	if (w > CTCP_MAX_WIN_PKTS)
		w = CTCP_MAX_WIN_PKTS;
	drtt = rtt_us - base_rtt_us;
	if (drtt > CTCP_MAX_DRTT_US)
		drtt = CTCP_MAX_DRTT_US;
	return ((w * drtt) << CTCP_Q16_SHIFT) / rtt_us;
}

/* One round of the delay-based window (draft section 3.2, no loss this round):
 *   dwnd += max(alpha * win^k - 1, 0)   if diff < gamma
 *   dwnd  = max(dwnd - zeta * diff, 0)  otherwise
 * Returns the new dwnd in Q16; *grew says which branch was taken. */
CTCP_INLINE __u64 ctcp_dwnd_round_q16(__u64 dwnd_q16, __u32 win_pkts, __u64 diff_q16, int *grew)
{
	__u64 shrink;

	if (diff_q16 < ((__u64)CTCP_GAMMA_PKTS << CTCP_Q16_SHIFT)) {
		*grew = 1;
		return dwnd_q16 + ctcp_dwnd_increase_q16(win_pkts);
	}
	*grew = 0;
	shrink = (diff_q16 * CTCP_ZETA_Q16) >> CTCP_Q16_SHIFT;
	return dwnd_q16 > shrink ? dwnd_q16 - shrink : 0;
}

/* dwnd after a loss (fast retransmit): max(win * (1 - beta) - cwnd / 2, 0),
 * with win = cwnd + dwnd before the loss and beta = 1/2. Q16 in and out. */
CTCP_INLINE __u64 ctcp_dwnd_after_loss_q16(__u32 cwnd_pkts, __u64 dwnd_q16)
{
	__u64 win_q16 = ((__u64)cwnd_pkts << CTCP_Q16_SHIFT) + dwnd_q16;
	__u64 keep = win_q16 >> 1;                           /* win * (1 - beta) */
	__u64 half_cwnd = (__u64)cwnd_pkts << (CTCP_Q16_SHIFT - 1);

	return keep > half_cwnd ? keep - half_cwnd : 0;
}

#endif /* CTCP_FIXED_H */

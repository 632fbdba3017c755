// SPDX-License-Identifier: GPL-2.0
/*
 * Compound TCP (draft-sridharan-tcpm-ctcp-02) as a BPF struct_ops TCP
 * congestion control.
 *
 * Send window win = cwnd + dwnd. cwnd is loss-based (Reno); dwnd is
 * delay-based, updated once per round trip from
 *     diff = win * (RTT - baseRTT) / RTT            (packets queued by us)
 *     diff <  gamma: dwnd += max(alpha * win^k - 1, 0)
 *     diff >= gamma: dwnd  = max(dwnd - zeta * diff, 0)
 *     loss:          dwnd  = max(win * (1 - beta) - cwnd / 2, 0)
 * with alpha = 1/8, beta = 1/2, k = 3/4, gamma = 30, zeta = 1, low_wnd = 41.
 * The arithmetic is in ctcp_fixed.h (Q16 fixed point), shared with the
 * user-space harness test_ctcp_fixed.c.
 *
 * Decisions where the draft is ambiguous (also in docs/compound-tcp.md):
 *  D1 Slow start: dwnd stays 0 and is not updated while the kernel window is
 *     below ssthresh. Slow start already doubles per round; a delay window on
 *     top would only overshoot harder. The draft starts dwnd "in congestion
 *     avoidance", this makes that explicit.
 *  D2 Low window: dwnd only grows while win >= low_wnd (41). Below it CTCP is
 *     Reno (the draft's rule that dwnd is used only above low_wnd); shrinking
 *     and the loss rule still apply so a window that fell below low_wnd never
 *     keeps a stale dwnd.
 *  D3 RTT of a round: the mean of the kernel's RTT samples (ack_sample.rtt_us)
 *     acked in the round; baseRTT: the minimum sample of the connection. The
 *     draft's "RTT" is an average; the mean (not Vegas' per-round minimum)
 *     makes diff the mean number of our packets in the queue.
 *  D4 Round: from one snd_nxt to the ACK that covers it (as Vegas does).
 *  D5 Per-ACK increase of cwnd in congestion avoidance is 1/win (not 1/cwnd),
 *     as the draft writes: cwnd += 1/(cwnd + dwnd).
 *  D6 Loss (ssthresh hook, fast retransmit or RTO): the kernel receives the
 *     new total win/2 (= cwnd/2 + dwnd' with the draft's dwnd' and beta = 1/2)
 *     and reduces to it with PRR; we split it as cwnd' = cwnd/2, dwnd' from
 *     the loss rule, and save the pre-loss split for undo.
 *  D7 Split after recovery: the kernel's snd_cwnd is the truth. Whenever it
 *     differs from the win we last wrote (end of PRR, RTO, idle restart,
 *     cwnd validation), the difference goes to cwnd first; dwnd only shrinks
 *     when cwnd would fall below 2. So after recovery ends at ssthresh the
 *     split is exactly D6's.
 *  D8 RTO (state Loss): dwnd = 0 and the round restarts; cwnd follows the
 *     kernel (1 segment, slow start to ssthresh).
 *  D9 Undo (spurious loss): both components return to the pre-loss split
 *     saved in D6; the kernel gets max(snd_cwnd, prior win) as Reno does.
 * D10 Slow start is our own flag (set at start, RTO and when the kernel
 *     leaves the window below ssthresh; cleared at ssthresh or a fast
 *     retransmit), not snd_cwnd < ssthresh: the kernel's ssthresh after a
 *     loss is the total win/2, and a later shrink of dwnd would otherwise
 *     look like slow start. In congestion avoidance ssthresh is lowered to
 *     win whenever dwnd shrinks below it.
 *
 * Name: CTCP_ID (an identifier, default `compound`) is the kernel algorithm
 * name and the struct_ops map name; the counters map is CTCP_ID##_st. Tests
 * build with a unique -DCTCP_ID so they never clash with an installed one.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
/* Global, hence verified once on its own (see ctcp_fixed.h). */
__u64 ctcp_pow34_q16_global(__u32 win_pkts);
#define CTCP_POW34_Q16 ctcp_pow34_q16_global
#include "ctcp_fixed.h"

#ifndef CTCP_ID
#define CTCP_ID compound
#endif
#define CTCP_STR2(x) #x
#define CTCP_STR(x) CTCP_STR2(x)
#define CTCP_CAT2(a, b) a##b
#define CTCP_CAT(a, b) CTCP_CAT2(a, b)

char _license[] SEC("license") = "GPL";

__attribute__((noinline)) __u64 ctcp_pow34_q16_global(__u32 win_pkts)
{
	return ctcp_pow34_q16(win_pkts);
}

#define TCP_CONG_NON_RESTRICTED 0x1
#define TCP_INFINITE_SSTHRESH 0x7fffffff
#define CTCP_MIN_CWND 2

/* Kernel helpers exported to BPF congestion controls (kfuncs). */
extern __u32 tcp_slow_start(struct tcp_sock *tp, __u32 acked) __ksym;

/* Per-connection state in icsk_ca_priv (104 bytes available). */
struct ctcp {
	__u64 dwnd_q16;          /* delay window, packets, Q16 */
	__u64 saved_dwnd_q16;    /* split before the last loss (for undo) */
	__u32 cwnd;              /* loss-based window, packets */
	__u32 cwnd_cnt;          /* ACKed packets toward the next +1 of cwnd */
	__u32 saved_cwnd;
	__u32 last_win;          /* the snd_cwnd we last wrote */
	__u32 base_rtt_us;       /* minimum RTT of the connection */
	__u32 rtt_sum_us;        /* RTT samples of the current round */
	__u32 rtt_cnt;
	__u32 round_end_seq;     /* the round ends when this is acked */
	__u32 slow_start;        /* 1 until the first loss or ssthresh (D1, D10) */
};

/* Counters per flow, readable with `bpftool map dump name <CTCP_ID>_st`. */
struct ctcp_flow_key {
	__u16 local_port;
	__u16 remote_port;
};

struct ctcp_flow_stats {
	__u32 win;               /* last written send window (cwnd + dwnd), packets */
	__u32 cwnd;              /* loss-based part */
	__u32 dwnd;              /* delay-based part (integer packets) */
	__u32 diff_milli;        /* diff of the last round, packets * 1000 */
	__u32 rtt_us;            /* mean RTT of the last round */
	__u32 base_rtt_us;
	__u32 rounds;            /* rounds ended in congestion avoidance */
	__u32 grow_rounds;       /* rounds with diff < gamma and win >= low_wnd */
	__u32 shrink_rounds;     /* rounds with diff >= gamma */
	__u32 max_dwnd;
	__u32 max_diff_milli_grow;   /* largest diff seen in a growing round */
	__u32 min_diff_milli_shrink; /* smallest diff seen in a shrinking round */
	__u32 losses;            /* ssthresh calls (fast retransmit or RTO) */
	__u32 rtos;              /* entries to state Loss */
	__u32 undos;
	__u32 resyncs;           /* kernel changed snd_cwnd behind our back (D7) */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct ctcp_flow_key);
	__type(value, struct ctcp_flow_stats);
} CTCP_CAT(CTCP_ID, _st) SEC(".maps");

#define STATS_MAP CTCP_CAT(CTCP_ID, _st)

static __always_inline struct ctcp *ctcp_of(struct sock *sk)
{
	return (struct ctcp *)((struct inet_connection_sock *)sk)->icsk_ca_priv;
}

static __always_inline struct tcp_sock *tcp_of(struct sock *sk)
{
	return (struct tcp_sock *)sk;
}

static __always_inline int seq_after(__u32 a, __u32 b)
{
	return (__s32)(a - b) > 0;
}

static __always_inline __u32 dwnd_pkts(const struct ctcp *ca)
{
	return (__u32)(ca->dwnd_q16 >> CTCP_Q16_SHIFT);
}

static __always_inline struct ctcp_flow_stats *flow_stats(struct sock *sk)
{
	struct ctcp_flow_key key = {
		.local_port = sk->__sk_common.skc_num,
		.remote_port = bpf_ntohs(sk->__sk_common.skc_dport),
	};
	struct ctcp_flow_stats *st = bpf_map_lookup_elem(&STATS_MAP, &key);

	if (st)
		return st;
	struct ctcp_flow_stats zero = { .min_diff_milli_shrink = 0xffffffff };

	bpf_map_update_elem(&STATS_MAP, &key, &zero, BPF_NOEXIST);
	return bpf_map_lookup_elem(&STATS_MAP, &key);
}

/* Write win = cwnd + dwnd to the kernel, clamped, and remember it (D7). */
static __always_inline void apply_win(struct sock *sk, struct ctcp *ca)
{
	struct tcp_sock *tp = tcp_of(sk);
	__u32 win = ca->cwnd + dwnd_pkts(ca);

	if (win > tp->snd_cwnd_clamp)
		win = tp->snd_cwnd_clamp;
	if (win < CTCP_MIN_CWND)
		win = CTCP_MIN_CWND;
	tp->snd_cwnd = win;
	ca->last_win = win;
	/* D10: in congestion avoidance ssthresh follows a shrinking dwnd down,
	 * so the kernel never mistakes a smaller win for slow start. */
	if (!ca->slow_start && tp->snd_ssthresh > win)
		tp->snd_ssthresh = win;
}

/* D7: adopt a window the kernel set, charging the change to cwnd first. */
static __always_inline void resync(struct sock *sk, struct ctcp *ca)
{
	struct tcp_sock *tp = tcp_of(sk);
	__u32 win = tp->snd_cwnd;
	__u32 dwnd = dwnd_pkts(ca);
	struct ctcp_flow_stats *st;

	if (win == ca->last_win)
		return;
	if (win >= dwnd + CTCP_MIN_CWND) {
		ca->cwnd = win - dwnd;
	} else {
		ca->cwnd = win < CTCP_MIN_CWND ? win : CTCP_MIN_CWND;
		ca->dwnd_q16 = (__u64)(win - ca->cwnd) << CTCP_Q16_SHIFT;
	}
	ca->last_win = win;
	/* An RTO or an idle restart left the window below ssthresh: slow start. */
	if (win < tp->snd_ssthresh)
		ca->slow_start = 1;
	st = flow_stats(sk);
	if (st)
		st->resyncs++;
}

static __always_inline void start_round(struct sock *sk, struct ctcp *ca)
{
	ca->round_end_seq = tcp_of(sk)->snd_nxt;
	ca->rtt_sum_us = 0;
	ca->rtt_cnt = 0;
}

/* End of a round in congestion avoidance: the delay-based update. */
static __always_inline void end_round(struct sock *sk, struct ctcp *ca)
{
	struct ctcp_flow_stats *st = flow_stats(sk);
	__u32 win = ca->cwnd + dwnd_pkts(ca);
	__u32 rtt_us;
	__u64 diff_q16;
	__u32 diff_milli;
	int grew = 0;

	if (ca->rtt_cnt == 0)
		return;
	rtt_us = ca->rtt_sum_us / ca->rtt_cnt;
	diff_q16 = ctcp_diff_q16(win, rtt_us, ca->base_rtt_us);
	diff_milli = (__u32)((diff_q16 * 1000) >> CTCP_Q16_SHIFT);

	if (win >= CTCP_LOW_WND_PKTS || diff_q16 >= ((__u64)CTCP_GAMMA_PKTS << CTCP_Q16_SHIFT))
		ca->dwnd_q16 = ctcp_dwnd_round_q16(ca->dwnd_q16, win, diff_q16, &grew);
	else
		grew = -1; /* D2: below low_wnd and no queue signal: Reno only */

	if (!st)
		return;
	st->rounds++;
	st->diff_milli = diff_milli;
	st->rtt_us = rtt_us;
	st->base_rtt_us = ca->base_rtt_us;
	if (grew == 1) {
		st->grow_rounds++;
		if (diff_milli > st->max_diff_milli_grow)
			st->max_diff_milli_grow = diff_milli;
	} else if (grew == 0) {
		st->shrink_rounds++;
		if (diff_milli < st->min_diff_milli_shrink)
			st->min_diff_milli_shrink = diff_milli;
	}
	if (dwnd_pkts(ca) > st->max_dwnd)
		st->max_dwnd = dwnd_pkts(ca);
}

static __always_inline void publish(struct sock *sk, struct ctcp *ca)
{
	struct ctcp_flow_stats *st = flow_stats(sk);

	if (!st)
		return;
	st->win = ca->last_win;
	st->cwnd = ca->cwnd;
	st->dwnd = dwnd_pkts(ca);
}

/* Not cwnd-limited: the application, not the window, limits sending. */
static __always_inline int cwnd_limited(struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);

	if (tp->snd_cwnd < tp->snd_ssthresh)
		return tp->snd_cwnd < 2 * tp->max_packets_out;
	return BPF_CORE_READ_BITFIELD(tp, is_cwnd_limited);
}

SEC("struct_ops/ctcp_init")
void BPF_PROG(ctcp_init, struct sock *sk)
{
	struct ctcp *ca = ctcp_of(sk);

	ca->dwnd_q16 = 0;
	ca->saved_dwnd_q16 = 0;
	ca->cwnd = tcp_of(sk)->snd_cwnd;
	ca->cwnd_cnt = 0;
	ca->saved_cwnd = ca->cwnd;
	ca->last_win = ca->cwnd;
	ca->base_rtt_us = 0xffffffff;
	ca->slow_start = 1;
	start_round(sk, ca);
}

SEC("struct_ops/ctcp_pkts_acked")
void BPF_PROG(ctcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct ctcp *ca = ctcp_of(sk);
	__s32 rtt_us = sample->rtt_us;

	if (rtt_us <= 0)
		return;
	if ((__u32)rtt_us < ca->base_rtt_us)
		ca->base_rtt_us = rtt_us;
	if (ca->rtt_sum_us < 0x7fffffff - (__u32)rtt_us) {
		ca->rtt_sum_us += rtt_us;
		ca->rtt_cnt++;
	}
}

SEC("struct_ops/ctcp_cong_avoid")
void BPF_PROG(ctcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct ctcp *ca = ctcp_of(sk);
	int round_over = seq_after(ack, ca->round_end_seq);

	resync(sk, ca);
	if (ca->slow_start) {
		/* D1: slow start on the whole (dwnd-free) window. */
		ca->dwnd_q16 = 0;
		if (cwnd_limited(sk))
			acked = tcp_slow_start(tp, acked);
		else
			acked = 0;
		ca->cwnd = tp->snd_cwnd;
		ca->last_win = tp->snd_cwnd;
		if (tp->snd_cwnd >= tp->snd_ssthresh)
			ca->slow_start = 0;
		if (round_over)
			start_round(sk, ca);
		if (!acked) {
			publish(sk, ca);
			return;
		}
		round_over = 0;
	}
	if (cwnd_limited(sk)) {
		/* D5: cwnd += acked / win, kept exact with a counter (no loop). */
		__u32 win = ca->cwnd + dwnd_pkts(ca);

		ca->cwnd_cnt += acked;
		if (ca->cwnd_cnt >= win) {
			__u32 inc = ca->cwnd_cnt / win;

			ca->cwnd_cnt -= inc * win;
			ca->cwnd += inc;
		}
	}
	if (round_over) {
		end_round(sk, ca);
		start_round(sk, ca);
	}
	apply_win(sk, ca);
	publish(sk, ca);
}

SEC("struct_ops/ctcp_ssthresh")
__u32 BPF_PROG(ctcp_ssthresh, struct sock *sk)
{
	struct ctcp *ca = ctcp_of(sk);
	struct ctcp_flow_stats *st;
	__u32 half_cwnd;
	__u32 win;

	resync(sk, ca);
	ca->saved_cwnd = ca->cwnd;
	ca->saved_dwnd_q16 = ca->dwnd_q16;
	/* D6: draft loss rule, then cwnd halves as in Reno. */
	ca->dwnd_q16 = ctcp_dwnd_after_loss_q16(ca->cwnd, ca->dwnd_q16);
	half_cwnd = ca->cwnd >> 1;
	ca->cwnd = half_cwnd > CTCP_MIN_CWND ? half_cwnd : CTCP_MIN_CWND;
	ca->cwnd_cnt = 0;
	ca->slow_start = 0;
	win = ca->cwnd + dwnd_pkts(ca);
	st = flow_stats(sk);
	if (st)
		st->losses++;
	/* The kernel reduces snd_cwnd toward win (PRR); resync (D7) adopts
	 * whatever it ends at, so last_win stays the pre-loss window. */
	return win > CTCP_MIN_CWND ? win : CTCP_MIN_CWND;
}

SEC("struct_ops/ctcp_set_state")
void BPF_PROG(ctcp_set_state, struct sock *sk, __u8 new_state)
{
	struct ctcp *ca = ctcp_of(sk);
	struct ctcp_flow_stats *st;

	if (new_state != TCP_CA_Loss)
		return;
	/* D8: a timeout ends the delay window; slow start restarts. */
	ca->dwnd_q16 = 0;
	ca->slow_start = 1;
	start_round(sk, ca);
	st = flow_stats(sk);
	if (st)
		st->rtos++;
}

SEC("struct_ops/ctcp_undo_cwnd")
__u32 BPF_PROG(ctcp_undo_cwnd, struct sock *sk)
{
	struct tcp_sock *tp = tcp_of(sk);
	struct ctcp *ca = ctcp_of(sk);
	struct ctcp_flow_stats *st;
	__u32 win;

	/* D9: restore the pre-loss split. */
	ca->cwnd = ca->saved_cwnd;
	ca->dwnd_q16 = ca->saved_dwnd_q16;
	win = ca->cwnd + dwnd_pkts(ca);
	if (win < tp->snd_cwnd)
		win = tp->snd_cwnd;
	if (win < tp->prior_cwnd)
		win = tp->prior_cwnd;
	ca->last_win = win;
	ca->cwnd = win > dwnd_pkts(ca) ? win - dwnd_pkts(ca) : win;
	st = flow_stats(sk);
	if (st)
		st->undos++;
	return win;
}

SEC(".struct_ops")
struct tcp_congestion_ops CTCP_ID = {
	.init = (void *)ctcp_init,
	.pkts_acked = (void *)ctcp_pkts_acked,
	.cong_avoid = (void *)ctcp_cong_avoid,
	.ssthresh = (void *)ctcp_ssthresh,
	.set_state = (void *)ctcp_set_state,
	.undo_cwnd = (void *)ctcp_undo_cwnd,
	.flags = TCP_CONG_NON_RESTRICTED,
	.name = CTCP_STR(CTCP_ID),
};

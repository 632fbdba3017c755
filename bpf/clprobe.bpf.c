// SPDX-License-Identifier: GPL-2.0
/*
 * congestlab's samplers (docs/probes.md): a kernel server's congestion state per ACK and
 * per retransmission, and the bottleneck queues' backlog and drops at their dequeues.
 *
 * The tracepoints are machine-wide, so every program first looks its event up in a filter
 * map filled by the user-space sampler (clprobe.c): sockets by (network namespace inode,
 * local port), queues by (network namespace inode, ifindex). Anything else costs one map
 * lookup and returns.
 *
 *   tp_btf/tcp_probe            top of tcp_rcv_established: the socket's state as a segment
 *                               arrives, before TCP processes it
 *   tp_btf/tcp_retransmit_skb   a segment sent again (fast retransmit, RTO, TLP, ...)
 *   tp_btf/qdisc_dequeue        a root qdisc's dequeue attempt (HTB at a shaped egress): its
 *                               aggregate backlog and drops after it, at most one row per
 *                               interval_ns per queue plus one when the queue has emptied
 *
 * Records go to one ring buffer; the user space is woken only when it holds WAKEUP_BYTES
 * (it also drains on a 100 ms timer), so a busy ACK stream costs no wake-up per event.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "clprobe.h"

#define AF_INET 2
#define AF_INET6 10
#define WAKEUP_BYTES (256 * 1024)

char LICENSE[] SEC("license") = "GPL";

extern unsigned int CONFIG_HZ __kconfig;

/* set by the sampler before load */
const volatile __u64 interval_ns = 1000000;

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 * 1024 * 1024);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CLPROBE_MAX_SOCKS);
	__type(key, struct clprobe_sock_key);
	__type(value, __u8);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CLPROBE_MAX_QUEUES);
	__type(key, struct clprobe_queue_key);
	__type(value, __u8);
} queues SEC(".maps");

/* per queue: when its last row went out, and what accumulated since */
struct queue_state {
	__u64 last_emit_ns;
	__u32 max_backlog_bytes;
	__u32 max_backlog_pkts;
	__u32 dequeues;
	__u32 last_row_nonempty;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, CLPROBE_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct queue_state);
} queue_states SEC(".maps");

/* records the ring buffer had no room for: [0] tcp, [1] queue */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} lost SEC(".maps");

static __always_inline void count_lost(__u32 which)
{
	__u64 *n = bpf_map_lookup_elem(&lost, &which);

	if (n)
		*n += 1;
}

static __always_inline __u64 wakeup_flag(void)
{
	return bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= WAKEUP_BYTES ? BPF_RB_FORCE_WAKEUP
									    : BPF_RB_NO_WAKEUP;
}

static __always_inline __u8 *server_of(const struct sock *sk)
{
	struct clprobe_sock_key key = {
		.netns_ino = sk->__sk_common.skc_net.net->ns.inum,
		.port = sk->__sk_common.skc_num,
	};

	return bpf_map_lookup_elem(&socks, &key);
}

/* The socket's congestion state; the caller fills what belongs to its event. */
static __always_inline struct clprobe_tcp_event *tcp_record(const struct sock *sk, __u8 server, __u8 kind)
{
	struct tcp_sock *tp = bpf_skc_to_tcp_sock((void *)sk);
	struct clprobe_tcp_event *e;

	if (!tp)
		return NULL;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(0);
		return NULL;
	}
	e->kind = kind;
	e->server = server;
	e->mono_ns = bpf_ktime_get_ns();
	e->sport = sk->__sk_common.skc_num;
	e->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (sk->__sk_common.skc_family == AF_INET6) {
		e->family = 6;
		BPF_CORE_READ_INTO(&e->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr32);
		BPF_CORE_READ_INTO(&e->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr32);
	} else {
		e->family = 4;
		e->saddr[0] = sk->__sk_common.skc_rcv_saddr;
		e->daddr[0] = sk->__sk_common.skc_daddr;
		e->saddr[1] = e->saddr[2] = e->saddr[3] = 0;
		e->daddr[1] = e->daddr[2] = e->daddr[3] = 0;
	}
	e->ca_state = BPF_CORE_READ_BITFIELD_PROBED(&tp->inet_conn, icsk_ca_state);
	e->rto_us = tp->inet_conn.icsk_rto * (1000000 / CONFIG_HZ);
	e->pacing_rate = sk->sk_pacing_rate;
	e->bytes_acked = tp->bytes_acked;
	e->snd_cwnd = tp->snd_cwnd;
	e->ssthresh = tp->snd_ssthresh;
	e->mss = tp->mss_cache;
	e->srtt_us = tp->srtt_us >> 3;
	e->mdev_us = tp->mdev_us >> 2;
	e->packets_out = tp->packets_out;
	e->sacked_out = tp->sacked_out;
	e->lost_out = tp->lost_out;
	e->retrans_out = tp->retrans_out;
	e->snd_una = tp->snd_una;
	e->snd_nxt = tp->snd_nxt;
	e->snd_wnd = tp->snd_wnd;
	e->ack_seq = 0;
	e->seq = 0;
	e->end_seq = 0;
	e->err = 0;
	return e;
}

SEC("tp_btf/tcp_probe")
int BPF_PROG(on_tcp_probe, const struct sock *sk, const struct sk_buff *skb)
{
	struct clprobe_tcp_event *e;
	struct tcp_skb_cb cb;
	__u8 *server = server_of(sk);

	if (!server)
		return 0;
	e = tcp_record(sk, *server, CLPROBE_ACK);
	if (!e)
		return 0;
	if (bpf_probe_read_kernel(&cb, sizeof(cb), (void *)skb->cb) == 0)
		e->ack_seq = cb.ack_seq;
	bpf_ringbuf_submit(e, wakeup_flag());
	return 0;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(on_tcp_retransmit, const struct sock *sk, const struct sk_buff *skb, int err)
{
	struct clprobe_tcp_event *e;
	struct tcp_skb_cb cb;
	__u8 *server = server_of(sk);

	if (!server)
		return 0;
	e = tcp_record(sk, *server, CLPROBE_RETRANSMIT);
	if (!e)
		return 0;
	if (bpf_probe_read_kernel(&cb, sizeof(cb), (void *)skb->cb) == 0) {
		e->seq = cb.seq;
		e->end_seq = cb.end_seq;
	}
	e->err = err;
	bpf_ringbuf_submit(e, wakeup_flag());
	return 0;
}

SEC("tp_btf/qdisc_dequeue")
int BPF_PROG(on_qdisc_dequeue, struct Qdisc *qdisc, const struct netdev_queue *txq, int packets,
	     struct sk_buff *skb)
{
	struct net_device *dev = txq->dev;
	struct clprobe_queue_key key = {
		.netns_ino = dev->nd_net.net->ns.inum,
		.ifindex = dev->ifindex,
	};
	struct clprobe_queue_event *e;
	struct queue_state *st;
	__u32 index, backlog_bytes, backlog_pkts;
	__u8 *queue = bpf_map_lookup_elem(&queues, &key);
	__u64 now;

	if (!queue)
		return 0;
	index = *queue;
	st = bpf_map_lookup_elem(&queue_states, &index);
	if (!st)
		return 0;
	/* one qdisc is dequeued by one CPU at a time (its running state), so the state
	 * needs no lock */
	now = bpf_ktime_get_ns();
	backlog_bytes = qdisc->qstats.backlog;
	backlog_pkts = qdisc->q.qlen;
	if (packets > 0)
		st->dequeues += packets;
	if (backlog_bytes > st->max_backlog_bytes)
		st->max_backlog_bytes = backlog_bytes;
	if (backlog_pkts > st->max_backlog_pkts)
		st->max_backlog_pkts = backlog_pkts;
	if (now - st->last_emit_ns < interval_ns && !(backlog_pkts == 0 && st->last_row_nonempty))
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(1);
		return 0;
	}
	e->kind = CLPROBE_QUEUE;
	e->queue = *queue;
	e->pad = 0;
	e->pad2 = 0;
	e->mono_ns = now;
	e->backlog_bytes = backlog_bytes;
	e->backlog_pkts = backlog_pkts;
	e->max_backlog_bytes = st->max_backlog_bytes;
	e->max_backlog_pkts = st->max_backlog_pkts;
	e->dequeues = st->dequeues;
	e->drops = qdisc->qstats.drops;
	bpf_ringbuf_submit(e, wakeup_flag());
	st->last_emit_ns = now;
	st->last_row_nonempty = backlog_pkts > 0;
	st->max_backlog_bytes = 0;
	st->max_backlog_pkts = 0;
	st->dequeues = 0;
	return 0;
}

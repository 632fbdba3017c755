/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The records clprobe.bpf.c puts in its ring buffer and clprobe.c writes out as CSV
 * (docs/probes.md). Shared by the BPF object and the user-space sampler, so both sides
 * agree on the layout; plain fixed-width types only.
 */
#ifndef CLPROBE_H
#define CLPROBE_H

#define CLPROBE_MAX_SOCKS 16  /* (netns, port) pairs: one per kernel server */
#define CLPROBE_MAX_QUEUES 16 /* (netns, ifindex) pairs: every shaped egress */

enum clprobe_kind {
	CLPROBE_ACK = 1,        /* tcp:tcp_probe */
	CLPROBE_RETRANSMIT = 2, /* tcp:tcp_retransmit_skb */
	CLPROBE_QUEUE = 3,      /* qdisc:qdisc_dequeue, one row per interval */
};

/* netns inode + local port -> server index */
struct clprobe_sock_key {
	__u32 netns_ino;
	__u32 port;
};

/* netns inode + ifindex -> queue index */
struct clprobe_queue_key {
	__u32 netns_ino;
	__u32 ifindex;
};

struct clprobe_tcp_event {
	__u8 kind;
	__u8 family; /* 4 or 6 */
	__u8 ca_state;
	__u8 server;
	__u16 sport; /* host order: the server's port */
	__u16 dport; /* host order: the client's port */
	__u64 mono_ns;
	__u64 pacing_rate;   /* bytes per second */
	__u64 bytes_acked;
	__u32 saddr[4];
	__u32 daddr[4];
	__u32 snd_cwnd;
	__u32 ssthresh;
	__u32 mss;
	__u32 srtt_us;
	__u32 mdev_us;
	__u32 rto_us;
	__u32 packets_out;
	__u32 sacked_out;
	__u32 lost_out;
	__u32 retrans_out;
	__u32 snd_una;
	__u32 snd_nxt;
	__u32 snd_wnd;
	__u32 ack_seq; /* CLPROBE_ACK: the arriving segment's ACK number */
	__u32 seq;     /* CLPROBE_RETRANSMIT: the segment sent again */
	__u32 end_seq;
	__s32 err;     /* CLPROBE_RETRANSMIT: tcp_retransmit_skb's result */
};

struct clprobe_queue_event {
	__u8 kind;
	__u8 queue;
	__u16 pad;
	__u32 dequeues;
	__u64 mono_ns;
	__u32 backlog_bytes;
	__u32 backlog_pkts;
	__u32 max_backlog_bytes;
	__u32 max_backlog_pkts;
	__u32 drops;
	__u32 pad2;
};

#endif

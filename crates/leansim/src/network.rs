//! One bottleneck between a client side and leanweb's stack, in virtual time.
//!
//! The server is leanweb's own [`Stack`] (crates/leanweb/src/stack.rs: the HTTP file server
//! and TCP of the real binary, fed Ethernet frames); the clients are leantcp connections
//! standing in for curl on the kernel's TCP; the links are leantcp's simulated links
//! (crates/leantcp/src/sim.rs: rate, drop-tail FIFO, delay, seeded loss). Every frame into
//! and out of the server is written to a pcap, so the analysis of a real run measures it.
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use leantcp::sim::{Link, LinkConfig, SeededRng};
use leantcp::{Connection, Instant, Segment, Seq, State, TcpConfig};
use leanweb::log::EventLog;
use leanweb::stack::{Stack, StackConfig};
use serde::Serialize;
use smoltcp::wire::{EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr};

use crate::pcap::PcapWriter;
use crate::scenario::{Background, ClientSpec, Family, LinkSpec, Scenario};

pub const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x04, 0x0b]);
/// The client side's frames come from the router in front of the server (as in the testbed).
pub const ROUTER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0x04, 0x01]);
pub const SERVER_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 4, 11);
pub const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 4, 0, 0, 0, 0x0b);
const CLIENT_V4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 10);
const CLIENT_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x0a);
const MEASURED_PORT_BASE: u16 = 40_000;
const BACKGROUND_PORT_BASE: u16 = 50_000;
/// Measured and background clients each get a port range of this size.
const MAX_CLIENTS_EACH: usize = 10_000;
/// A stuck loop (an event at `now` that does not move) ends the run instead of spinning.
const MAX_STEPS: u64 = 200_000_000;
/// Pcap timestamps start here (2020-01-01): the analysis wants epoch-like times.
const EPOCH_US: u64 = 1_577_836_800_000_000;

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("server flags: {0}")]
    ServerFlags(String),
    #[error("scenario: {0}")]
    Scenario(String),
    #[error("pcap: {0}")]
    Pcap(#[from] std::io::Error),
    #[error("no progress after {0} steps at t = {1} us (a timer that does not move)")]
    Stuck(u64, u64),
}

pub fn link_config(spec: &LinkSpec, seed: u64) -> LinkConfig {
    LinkConfig {
        rate_bps: spec.rate_bps,
        delay: Duration::from_secs_f64(spec.delay_ms.max(0.0) / 1000.0),
        queue_packets: spec.queue_packets.max(1),
        loss: spec.loss,
        seed,
        drop_indices: Vec::new(),
        delay_indices: Vec::new(),
    }
}

/// leanweb's flags, parsed by leanweb's own parser, on the simulation's addresses.
pub fn server_config(scenario: &Scenario) -> Result<StackConfig, SimError> {
    use clap::Parser;
    let mut argv: Vec<String> = vec!["leanweb".into()];
    argv.extend(scenario.server_args.iter().cloned());
    argv.extend([
        "--addr4".into(), format!("{SERVER_V4}/24"), "--addr6".into(), format!("{SERVER_V6}/64"),
        "--mac".into(), "02:00:00:00:04:0b".into(), "--port".into(), scenario.port.to_string(),
        "--root".into(), scenario.root.display().to_string(),
    ]);
    let args = leanweb::config::Args::try_parse_from(&argv).map_err(|e| SimError::ServerFlags(e.to_string().lines().next().unwrap_or("").to_string()))?;
    args.stack_config(scenario.seed).map_err(|e| SimError::ServerFlags(e.to_string()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Measured(usize),
    Background(usize),
}

struct Client {
    role: Role,
    local: SocketAddr,
    remote: SocketAddr,
    path: String,
    start_at: Option<Instant>,
    conn: Option<Connection>,
    response: Vec<u8>,
    body_expected: Option<usize>,
    started: Option<Instant>,
    body_done: Option<Instant>,
}

impl Client {
    fn new(role: Role, family: Family, local_port: u16, server_port: u16, path: &str, start_at: Option<Instant>) -> Self {
        let (local, remote) = match family {
            Family::V4 => (IpAddr::V4(CLIENT_V4), IpAddr::V4(SERVER_V4)),
            Family::V6 => (IpAddr::V6(CLIENT_V6), IpAddr::V6(SERVER_V6)),
        };
        Client {
            role,
            local: SocketAddr::new(local, local_port),
            remote: SocketAddr::new(remote, server_port),
            path: path.to_string(),
            start_at,
            conn: None,
            response: Vec::new(),
            body_expected: None,
            started: None,
            body_done: None,
        }
    }

    /// Reads what arrived; true when the whole body is in (curl then closes: FIN).
    fn read(&mut self, conn: &mut Connection, window: &ClientSpec) -> bool {
        let data = conn.recv(usize::MAX);
        if window.grow_window && !data.is_empty() {
            let grown = conn.recv_buffer_bytes().saturating_add(data.len()).min(window.max_recv_buffer_bytes);
            conn.set_recv_buffer_bytes(grown.max(conn.recv_buffer_bytes()));
        }
        self.response.extend(data);
        if self.body_expected.is_none() {
            if let Some(end) = self.response.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.response[..end]).to_ascii_lowercase();
                let length = head.lines().find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()));
                self.body_expected = Some(end + 4 + length.unwrap_or(0));
            }
        }
        matches!(self.body_expected, Some(total) if self.response.len() >= total)
    }

    /// Past the client's FIN and the server's answer to it: the capture has what the analysis needs.
    fn finished(&self) -> bool {
        self.body_done.is_some() && self.conn.as_ref().is_some_and(|c| matches!(c.state(), State::TimeWait | State::Closed) || c.is_closed())
    }
}

struct UdpSource {
    interval: Duration,
    frame: Vec<u8>,
    next_at: Instant,
}

#[derive(Debug, Default, Clone, Serialize)]
pub struct LinkCounters {
    pub offered: u64,
    pub dropped_queue: u64,
    pub dropped_loss: u64,
}

impl From<&Link> for LinkCounters {
    fn from(link: &Link) -> Self {
        LinkCounters { offered: link.offered, dropped_queue: link.dropped_queue, dropped_loss: link.dropped_loss }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct GetOutcome {
    pub family: &'static str,
    pub client_port: u16,
    pub path: String,
    pub ok: bool,
    /// Virtual time of the SYN and of the body's last byte at the client, µs.
    pub start_us: Option<u64>,
    pub body_done_us: Option<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub virtual_us: u64,
    pub steps: u64,
    pub frames_captured: u64,
    pub pcap_epoch_us: u64,
    pub data_link: LinkCounters,
    pub ack_link: LinkCounters,
    pub gets: Vec<GetOutcome>,
    pub background_gets_started: usize,
    pub background_gets_done: usize,
    pub udp_frames_sent: u64,
    pub udp_frames_delivered: u64,
    pub server: leanweb::stack::Counters,
}

pub struct Network<W: Write> {
    now: Instant,
    limit: Instant,
    server: Stack,
    data_link: Link,
    ack_link: Link,
    clients: Vec<Client>,
    measured_order: Vec<usize>,
    udp: Vec<UdpSource>,
    udp_sent: u64,
    udp_delivered: u64,
    client_config: TcpConfig,
    client_spec: ClientSpec,
    gap: Duration,
    rng: SeededRng,
    pcap: PcapWriter<W>,
    steps: u64,
}

fn ms(value: f64) -> Duration {
    Duration::from_secs_f64(value.max(0.0) / 1000.0)
}

fn family_name(addr: &SocketAddr) -> &'static str {
    if addr.is_ipv4() {
        "v4"
    } else {
        "v6"
    }
}

fn ethernet(src: EthernetAddress, dst: EthernetAddress, ip: &[u8]) -> Vec<u8> {
    let ethertype = if ip.first().is_some_and(|b| b >> 4 == 6) { EthernetProtocol::Ipv6 } else { EthernetProtocol::Ipv4 };
    let repr = EthernetRepr { src_addr: src, dst_addr: dst, ethertype };
    let mut buf = vec![0u8; repr.buffer_len() + ip.len()];
    let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
    repr.emit(&mut frame);
    frame.payload_mut().copy_from_slice(ip);
    buf
}

/// A datagram-sized frame for the background source: an IP header naming UDP (the client
/// side counts and drops it), zero payload. Only its length matters to the links.
fn udp_frame(family: Family, frame_bytes: usize) -> Vec<u8> {
    let mut ip = vec![0u8; frame_bytes.saturating_sub(14).max(48)];
    match family {
        Family::V4 => {
            ip[0] = 0x45;
            ip[9] = 17;
        }
        Family::V6 => {
            ip[0] = 0x60;
            ip[6] = 17;
        }
    }
    ethernet(SERVER_MAC, ROUTER_MAC, &ip)
}

impl<W: Write> Network<W> {
    pub fn new(scenario: &Scenario, pcap_out: W) -> Result<Self, SimError> {
        if scenario.gets.is_empty() && scenario.background.is_empty() {
            return Err(SimError::Scenario("nothing to simulate: no gets and no background".into()));
        }
        if scenario.gets.len() > MAX_CLIENTS_EACH {
            return Err(SimError::Scenario(format!("{} gets: at most {MAX_CLIENTS_EACH}", scenario.gets.len())));
        }
        for (name, link) in [("data_link", &scenario.data_link), ("ack_link", &scenario.ack_link)] {
            if !(0.0..1.0).contains(&link.loss) || !link.delay_ms.is_finite() || link.delay_ms < 0.0 {
                return Err(SimError::Scenario(format!("{name}: loss must be in [0, 1) and delay_ms >= 0")));
            }
        }
        let config = server_config(scenario)?;
        let server = Stack::new(config, EventLog::disabled(), scenario.seed);
        let warmup = ms(scenario.warmup_ms);
        let mut clients = Vec::new();
        let mut measured_order = Vec::new();
        for (i, get) in scenario.gets.iter().enumerate() {
            let start = (i == 0).then(|| Instant::ZERO + warmup);
            measured_order.push(clients.len());
            clients.push(Client::new(Role::Measured(i), get.family, MEASURED_PORT_BASE + i as u16, scenario.port, &get.path, start));
        }
        let mut udp = Vec::new();
        let mut background_index = 0usize;
        for flow in &scenario.background {
            match flow {
                Background::Udp { rate_bps, frame_bytes, family } => {
                    if *rate_bps <= 0.0 || *frame_bytes < 64 || *frame_bytes > 9018 {
                        return Err(SimError::Scenario(format!("udp background: rate_bps {rate_bps} must be > 0 and frame_bytes {frame_bytes} in 64..9018")));
                    }
                    let interval = Duration::from_secs_f64(*frame_bytes as f64 * 8.0 / rate_bps);
                    udp.push(UdpSource { interval, frame: udp_frame(*family, *frame_bytes), next_at: Instant::ZERO });
                }
                Background::Get { path, family, interval_ms, count } => {
                    if *interval_ms <= 0.0 || background_index + *count > MAX_CLIENTS_EACH {
                        return Err(SimError::Scenario(format!("get background: interval_ms {interval_ms} must be > 0 and all counts together at most {MAX_CLIENTS_EACH}")));
                    }
                    for k in 0..*count {
                        let at = Instant::ZERO + ms(interval_ms * k as f64);
                        let port = BACKGROUND_PORT_BASE + background_index as u16;
                        clients.push(Client::new(Role::Background(background_index), *family, port, scenario.port, path, Some(at)));
                        background_index += 1;
                    }
                }
            }
        }
        let client_config = TcpConfig {
            recv_buffer_bytes: scenario.client.recv_buffer_bytes.max(1),
            window_scale: scenario.client.window_scale.min(14),
            time_wait: Duration::from_millis(1),
            ..TcpConfig::modern()
        };
        Ok(Network {
            now: Instant::ZERO,
            limit: Instant::ZERO + Duration::from_secs_f64(scenario.limit_s.clamp(0.001, 86_400.0)),
            server,
            data_link: Link::new(link_config(&scenario.data_link, scenario.seed)),
            ack_link: Link::new(link_config(&scenario.ack_link, scenario.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)),
            clients,
            measured_order,
            udp,
            udp_sent: 0,
            udp_delivered: 0,
            client_config,
            client_spec: scenario.client.clone(),
            gap: ms(scenario.gap_ms),
            rng: SeededRng::new(scenario.seed ^ 0x5eed),
            pcap: PcapWriter::new(pcap_out, EPOCH_US)?,
            steps: 0,
        })
    }

    fn measured_done(&self) -> bool {
        self.measured_order.iter().all(|&i| self.clients[i].finished())
    }

    fn all_done(&self) -> bool {
        if self.measured_order.is_empty() {
            self.clients.iter().all(Client::finished) && self.udp.is_empty()
        } else {
            self.measured_done()
        }
    }

    /// Opens due connections, writes requests, reads responses, sends what the clients send.
    fn pump_clients(&mut self) -> Result<(), SimError> {
        let now = self.now;
        let mut next_measured: Option<usize> = None;
        for client in &mut self.clients {
            if client.conn.is_none() && client.start_at.is_some_and(|t| t <= now) {
                let iss = Seq(self.rng.next_u64() as u32);
                let mut conn = Connection::connect(client.local, client.remote, self.client_config, iss);
                let host = match client.remote.ip() {
                    IpAddr::V4(a) => a.to_string(),
                    IpAddr::V6(a) => format!("[{a}]"),
                };
                // curl's request head (its default headers), so the request segment is as long.
                let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n", client.path, host);
                let taken = conn.send(request.as_bytes());
                if taken != request.len() {
                    return Err(SimError::Scenario("the client's send buffer cannot hold the request".into()));
                }
                client.conn = Some(conn);
                client.started = Some(now);
            }
            let Some(mut conn) = client.conn.take() else { continue };
            if client.body_done.is_none() && client.read(&mut conn, &self.client_spec) {
                client.body_done = Some(now);
                conn.close(now);
                if let Role::Measured(i) = client.role {
                    next_measured = Some(i + 1);
                }
            } else if client.body_done.is_some() {
                conn.recv(usize::MAX);
            }
            while let Some(seg) = conn.poll_transmit(now) {
                let ip = seg.to_ip_bytes(64).map_err(|e| SimError::Scenario(format!("client segment: {e:?}")))?;
                self.ack_link.send(now, ethernet(ROUTER_MAC, SERVER_MAC, &ip));
            }
            client.conn = Some(conn);
        }
        if let Some(next) = next_measured {
            if let Some(&index) = self.measured_order.get(next) {
                self.clients[index].start_at = Some(now + self.gap);
            }
        }
        Ok(())
    }

    fn pump_server(&mut self) -> Result<(), SimError> {
        self.server.handle_timeouts(self.now);
        self.server.poll(self.now);
        for frame in self.server.take_output() {
            self.pcap.write(self.now.as_micros(), &frame)?;
            self.data_link.send(self.now, frame);
        }
        Ok(())
    }

    fn pump_udp(&mut self) {
        let stop = !self.measured_order.is_empty() && self.measured_done();
        for source in &mut self.udp {
            while !stop && source.next_at <= self.now {
                self.data_link.send(self.now, source.frame.clone());
                self.udp_sent += 1;
                source.next_at = source.next_at + source.interval;
            }
        }
    }

    fn next_event(&self) -> Option<Instant> {
        let clients = self.clients.iter().flat_map(|c| {
            let start = if c.conn.is_none() { c.start_at } else { None };
            [start, c.conn.as_ref().and_then(|conn| conn.poll_timeout())]
        });
        let udp = self.udp.iter().map(|s| Some(s.next_at));
        [self.data_link.next_delivery(), self.ack_link.next_delivery(), self.server.poll_timeout()]
            .into_iter()
            .chain(clients)
            .chain(udp)
            .flatten()
            .min()
    }

    fn deliver_to_clients(&mut self, frame: &[u8]) {
        let Ok(eth) = EthernetFrame::new_checked(frame) else { return };
        let Ok(seg) = Segment::parse_ip(eth.payload()) else {
            self.udp_delivered += 1; // not TCP: a background datagram reaching its sink
            return;
        };
        if let Some(client) = self.clients.iter_mut().find(|c| c.local == seg.dst && c.remote == seg.src) {
            if let Some(conn) = client.conn.as_mut() {
                conn.handle_segment(&seg, self.now);
            }
        }
    }

    pub fn run(mut self) -> Result<(Outcome, W), SimError> {
        loop {
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(SimError::Stuck(self.steps, self.now.as_micros()));
            }
            self.pump_clients()?;
            self.pump_server()?;
            self.pump_udp();
            if self.all_done() {
                break;
            }
            let Some(next) = self.next_event() else { break };
            if next > self.limit {
                self.now = self.limit;
                break;
            }
            self.now = self.now.max(next);
            while let Some(frame) = self.data_link.pop_due(self.now) {
                self.deliver_to_clients(&frame);
            }
            while let Some(frame) = self.ack_link.pop_due(self.now) {
                self.pcap.write(self.now.as_micros(), &frame)?;
                self.server.handle_frame(&frame, self.now);
            }
            for client in &mut self.clients {
                if let Some(conn) = client.conn.as_mut() {
                    if matches!(conn.poll_timeout(), Some(t) if t <= self.now) {
                        conn.handle_timeout(self.now);
                    }
                }
            }
        }
        let mut gets = Vec::new();
        let mut background_started = 0;
        let mut background_done = 0;
        for client in &self.clients {
            match client.role {
                Role::Measured(_) => gets.push(GetOutcome {
                    family: family_name(&client.local),
                    client_port: client.local.port(),
                    path: client.path.clone(),
                    ok: client.body_done.is_some(),
                    start_us: client.started.map(Instant::as_micros),
                    body_done_us: client.body_done.map(Instant::as_micros),
                }),
                Role::Background(_) => {
                    background_started += usize::from(client.started.is_some());
                    background_done += usize::from(client.body_done.is_some());
                }
            }
        }
        let outcome = Outcome {
            virtual_us: self.now.as_micros(),
            steps: self.steps,
            frames_captured: self.pcap.frames,
            pcap_epoch_us: EPOCH_US,
            data_link: LinkCounters::from(&self.data_link),
            ack_link: LinkCounters::from(&self.ack_link),
            gets,
            background_gets_started: background_started,
            background_gets_done: background_done,
            udp_frames_sent: self.udp_sent,
            udp_frames_delivered: self.udp_delivered,
            server: self.server.counters,
        };
        Ok((outcome, self.pcap.finish()?))
    }
}

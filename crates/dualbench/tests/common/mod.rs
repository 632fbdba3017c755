//! Tiny servers the tests start on 127.0.0.1 and ::1 (port 0), and helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Clone, Copy)]
pub enum Behaviour {
    /// 200 with a body of this many bytes; keep-alive if the client asks for it
    Serve(usize),
    /// read the request, then RST (SO_LINGER 0 close)
    Reset,
    /// accept, read, never answer; the connection stays open
    Stall,
    /// answer 200 after this delay
    Slow(Duration, usize),
}

pub struct Server {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub async fn start(bind: &str, behaviour: Behaviour) -> Server {
    let listener = TcpListener::bind(bind).await.expect("bind test server");
    let addr = listener.local_addr().unwrap();
    let held: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
    let task = tokio::spawn(async move {
        let mut conns = tokio::task::JoinSet::new();
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            conns.spawn(serve(stream, behaviour, held.clone()));
            while conns.try_join_next().is_some() {}
        }
    });
    Server { addr, task }
}

async fn read_request(stream: &mut TcpStream) -> Option<bool> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let text = String::from_utf8_lossy(&buf).to_ascii_lowercase();
            return Some(text.contains("connection: keep-alive"));
        }
    }
}

async fn respond(stream: &mut TcpStream, size: usize, keepalive: bool) -> std::io::Result<()> {
    let conn = if keepalive { "keep-alive" } else { "close" };
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nConnection: {conn}\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(&vec![b'x'; size]).await
}

async fn serve(mut stream: TcpStream, behaviour: Behaviour, held: Arc<Mutex<Vec<TcpStream>>>) {
    match behaviour {
        Behaviour::Serve(size) => {
            while let Some(keepalive) = read_request(&mut stream).await {
                if respond(&mut stream, size, keepalive).await.is_err() || !keepalive {
                    break;
                }
            }
        }
        Behaviour::Reset => {
            let _ = read_request(&mut stream).await;
            socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)).unwrap();
            drop(stream);
        }
        Behaviour::Stall => {
            let _ = read_request(&mut stream).await;
            held.lock().unwrap().push(stream);
        }
        Behaviour::Slow(delay, size) => {
            if read_request(&mut stream).await.is_some() {
                tokio::time::sleep(delay).await;
                let _ = respond(&mut stream, size, false).await;
            }
        }
    }
}

/// A loopback port with nothing listening (bound, then released).
pub fn refused_addr(bind: &str) -> SocketAddr {
    let l = std::net::TcpListener::bind(bind).unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    a
}

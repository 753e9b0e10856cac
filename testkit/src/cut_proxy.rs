//! A TCP proxy for tests that break connections on purpose: it forwards every connection made to it on 127.0.0.1
//! to one upstream address and cuts them on demand ([`CutProxy::cut_all`]) or, when asked, each one after a random
//! number of bytes sent towards the client ([`CutProxy::cut_randomly`], seeded, so a failing run can be repeated).
//!
//! A cut is a reset (`SO_LINGER` 0, then close) of both sides: what a restarted proxy, a lost route or an
//! idle-connection reaper leaves a client with. Connections that end by themselves are closed normally, half-close
//! included, so nothing the server sent is lost except by a cut.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The proxy; dropping it stops accepting and cuts every live connection.
pub struct CutProxy {
    /// Where clients connect (127.0.0.1 and a port of its own).
    pub addr: SocketAddr,
    shared: Arc<Shared>,
    accept: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Shared {
    connections: AtomicU64,
    cuts: AtomicU64,
    /// Bytes forwarded towards clients, over all connections.
    down_bytes: AtomicU64,
    /// The cut signal of each live connection, by its number.
    live: Mutex<HashMap<u64, Arc<Notify>>>,
    random: Mutex<Option<RandomCuts>>,
    /// New connections whose request is still to be lost: read, thrown away, and the connection reset.
    lose_requests: AtomicU64,
}

/// Random cuts still to make: each new connection gets a byte budget in `min..=max` until `left` cuts are done.
struct RandomCuts {
    state: u64,
    min: u64,
    max: u64,
    left: u64,
}

impl RandomCuts {
    /// The next budget (xorshift64), or none once every cut asked for is made.
    fn next_budget(&mut self) -> Option<u64> {
        if self.left == 0 {
            return None;
        }
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        Some(self.min + self.state % (self.max - self.min + 1))
    }
}

impl CutProxy {
    /// A proxy on 127.0.0.1:0 to `upstream`. Needs a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<CutProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::default());
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let number = accepting.connections.fetch_add(1, Ordering::SeqCst);
                let lose =
                    accepting.lose_requests.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
                if lose.is_ok() {
                    let shared = accepting.clone();
                    tokio::spawn(async move {
                        let mut client = client;
                        let _ = client.read(&mut [0u8; 64 * 1024]).await;
                        let _ = client.set_zero_linger();
                        drop(client);
                        shared.cuts.fetch_add(1, Ordering::SeqCst);
                    });
                    continue;
                }
                let cut = Arc::new(Notify::new());
                accepting.live.lock().unwrap().insert(number, cut.clone());
                let budget = accepting.random.lock().unwrap().as_mut().and_then(RandomCuts::next_budget);
                let shared = accepting.clone();
                tokio::spawn(async move {
                    let cut_done = match TcpStream::connect(upstream).await {
                        Ok(server) => forward(client, server, &cut, budget, &shared).await,
                        Err(_) => false,
                    };
                    shared.live.lock().unwrap().remove(&number);
                    if cut_done {
                        if budget.is_some() {
                            if let Some(random) = shared.random.lock().unwrap().as_mut() {
                                random.left = random.left.saturating_sub(1);
                            }
                        }
                        shared.cuts.fetch_add(1, Ordering::SeqCst);
                    }
                });
            }
        });
        Ok(CutProxy { addr, shared, accept })
    }

    /// `http://127.0.0.1:PORT`: the proxy's address as a base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Cuts every connection live right now; returns how many there were.
    pub fn cut_all(&self) -> usize {
        let live = self.shared.live.lock().unwrap();
        for cut in live.values() {
            cut.notify_one();
        }
        live.len()
    }

    /// From now on, cuts each new connection once it has sent between `min` and `max` bytes (inclusive; chosen by a
    /// xorshift generator from `seed`) towards the client, until `cuts` such cuts are done. Connections open
    /// already keep going.
    pub fn cut_randomly(&self, seed: u64, min: u64, max: u64, cuts: u64) {
        assert!(0 < min && min <= max, "a budget range 0 < min <= max");
        *self.shared.random.lock().unwrap() = Some(RandomCuts { state: seed | 1, min, max, left: cuts });
    }

    /// Loses the request of each of the next `count` connections: its first bytes are read and thrown away, then the
    /// connection is reset, and nothing reaches the upstream. A request lost on its way to the server.
    pub fn lose_requests(&self, count: u64) {
        self.shared.lose_requests.store(count, Ordering::SeqCst);
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Connections cut so far (on demand or at random), counted once each when its reset is done.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// Bytes forwarded towards clients so far.
    pub fn down_bytes(&self) -> u64 {
        self.shared.down_bytes.load(Ordering::SeqCst)
    }

    /// Connections live right now.
    pub fn live(&self) -> usize {
        self.shared.live.lock().unwrap().len()
    }
}

impl Drop for CutProxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut_all();
    }
}

/// Forwards between `client` and `server` until both sides are done (false) or the connection is cut (true): by
/// `cut`, or once `budget` bytes went towards the client.
async fn forward(
    mut client: TcpStream,
    mut server: TcpStream,
    cut: &Notify,
    mut budget: Option<u64>,
    shared: &Shared,
) -> bool {
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (mut up, mut down) = (vec![0u8; 64 * 1024], vec![0u8; 64 * 1024]);
    let (mut client_open, mut server_open) = (true, true);
    let cut_now = loop {
        if !client_open && !server_open {
            break false;
        }
        tokio::select! {
            () = cut.notified() => break true,
            read = client.read(&mut up), if client_open => match read {
                Ok(0) | Err(_) => {
                    client_open = false;
                    let _ = server.shutdown().await;
                }
                Ok(n) => {
                    if server.write_all(&up[..n]).await.is_err() {
                        break false;
                    }
                }
            },
            read = server.read(&mut down), if server_open => match read {
                Ok(0) | Err(_) => {
                    server_open = false;
                    let _ = client.shutdown().await;
                }
                Ok(n) => {
                    let allowed = budget.map_or(n as u64, |left| left.min(n as u64)) as usize;
                    if client.write_all(&down[..allowed]).await.is_err() {
                        break false;
                    }
                    shared.down_bytes.fetch_add(allowed as u64, Ordering::SeqCst);
                    if let Some(left) = &mut budget {
                        *left -= allowed as u64;
                        if *left == 0 {
                            break true;
                        }
                    }
                }
            },
        }
    };
    if cut_now {
        // A reset, not a FIN: the peer's next read fails at once instead of seeing a clean end of stream.
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
    cut_now
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server: every byte it reads comes back.
    async fn echo() -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let (mut read, mut write) = socket.split();
                    let _ = tokio::io::copy(&mut read, &mut write).await;
                });
            }
        });
        addr
    }

    /// Writes `bytes` through a fresh connection and reads back until EOF or an error: what came back, and whether
    /// the read ended in an error (a reset).
    async fn round_trip(proxy: &CutProxy, bytes: &[u8]) -> (Vec<u8>, bool) {
        let mut socket = TcpStream::connect(proxy.addr).await.unwrap();
        let (mut read, mut write) = socket.split();
        let writing = async {
            let _ = write.write_all(bytes).await;
            let _ = write.shutdown().await;
        };
        let mut back = Vec::new();
        let reading = async {
            let mut buf = vec![0u8; 8192];
            loop {
                match read.read(&mut buf).await {
                    Ok(0) => return false,
                    Ok(n) => back.extend_from_slice(&buf[..n]),
                    Err(_) => return true,
                }
            }
        };
        let ((), reset) = tokio::join!(writing, reading);
        (back, reset)
    }

    #[tokio::test]
    async fn forwards_everything_and_passes_a_half_close() {
        let proxy = CutProxy::start(echo().await).await.unwrap();
        let bytes = crate::random_bytes(3 * 1024 * 1024, 7);
        let (back, reset) = round_trip(&proxy, &bytes).await;
        assert!(!reset);
        assert!(back == bytes, "{} of {} bytes came back", back.len(), bytes.len());
        assert_eq!((proxy.connections(), proxy.cuts()), (1, 0));
        assert_eq!(proxy.down_bytes(), bytes.len() as u64);
    }

    #[tokio::test]
    async fn cut_all_resets_every_live_connection() {
        let proxy = CutProxy::start(echo().await).await.unwrap();
        let mut sockets = Vec::new();
        for _ in 0..3 {
            let mut socket = TcpStream::connect(proxy.addr).await.unwrap();
            socket.write_all(b"ping").await.unwrap();
            let mut back = [0u8; 4];
            socket.read_exact(&mut back).await.unwrap();
            sockets.push(socket);
        }
        assert_eq!(proxy.cut_all(), 3);
        for socket in &mut sockets {
            let mut rest = Vec::new();
            // A reset reads as an error; either way nothing more arrives and the connection is over.
            let ended = socket.read_to_end(&mut rest).await;
            assert!(rest.is_empty() && ended.map_or(true, |n| n == 0));
        }
        crate::wait_until("the cuts to be counted", || proxy.cuts() == 3);
        assert_eq!((proxy.connections(), proxy.live()), (3, 0));
        let (back, _) = round_trip(&proxy, b"after").await;
        assert_eq!(back, b"after", "a new connection after a cut works");
    }

    #[tokio::test]
    async fn random_cuts_follow_the_seed_and_stop_after_the_count() {
        let proxy = CutProxy::start(echo().await).await.unwrap();
        let bytes = crate::random_bytes(200_000, 3);
        proxy.cut_randomly(42, 1000, 50_000, 3);
        let mut expected = RandomCuts { state: 42 | 1, min: 1000, max: 50_000, left: 3 };
        let mut budgets = 0;
        for cut in 1..=3 {
            let budget = expected.next_budget().unwrap() as usize;
            budgets += budget as u64;
            let (back, _) = round_trip(&proxy, &bytes).await;
            // The reset throws away what was still in the proxy's send buffer, as a real one does: a prefix of the
            // budget arrives, never more.
            assert!(back.len() <= budget && back == bytes[..back.len()], "{} of a {budget}-byte budget", back.len());
            crate::wait_until("the cut to be counted", || proxy.cuts() == cut);
            assert_eq!(proxy.down_bytes(), budgets, "the proxy forwarded exactly the seeded byte counts");
        }
        let (back, reset) = round_trip(&proxy, &bytes).await;
        assert!(!reset && back == bytes, "after the asked-for cuts, connections are whole again");
        assert_eq!((proxy.connections(), proxy.cuts()), (4, 3));
    }

    #[tokio::test]
    async fn lost_requests_never_reach_the_upstream() {
        let proxy = CutProxy::start(echo().await).await.unwrap();
        proxy.lose_requests(2);
        for _ in 0..2 {
            let (back, _) = round_trip(&proxy, b"lost").await;
            assert!(back.is_empty());
        }
        let (back, reset) = round_trip(&proxy, b"kept").await;
        assert!(!reset && back == b"kept");
        assert_eq!((proxy.connections(), proxy.cuts(), proxy.down_bytes()), (3, 2, 4));
    }
}

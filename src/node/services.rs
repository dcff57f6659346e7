//! kube-proxy's part of the node (issue 46 item 1): a pod reaches a ClusterIP Service's
//! `ClusterIP:port` and lands on one of its ready endpoints; the `kubernetes` Service of
//! namespace `default` lands on the API server of the node's kubeconfig.
//!
//! The mechanism (docs/node.md, "Services"): a userspace TCP proxy in a network namespace of
//! the node's own, the **services sandbox** ([`SANDBOX_ID`], a sandbox of the pod network like
//! a pod's, with an IP on the bridge). Every ClusterIP is an address on that namespace's `lo`,
//! with a listener per `ClusterIP:port` created inside it; each pod gets a route for the
//! service CIDRs (the API server's `ServiceCIDR` objects) via the services sandbox's IP. A
//! connection accepted there is relayed (`copy_bidirectional`) from the host namespace to an
//! endpoint chosen round-robin among the ready ones (EndpointSlices, watched as kube-proxy
//! watches them).
//!
//! Why a namespace of its own rather than the host's: every node on a machine (and every
//! control plane's `kubernetes` Service, 10.0.0.1 for all of them) would want the same
//! `ClusterIP:port` in the host namespace; here each node's pods reach their own node's proxy.
//! Why not DNAT rules: `iptables`/`nft` are not installed where probelet runs its tests.
//!
//! Cleanup: the addresses live in the services sandbox and the routes in the pods' sandboxes,
//! so they go with them (a clean stop removes the sandboxes; the next start on the run
//! directory removes what a crash left, [`crate::runtime::netns`]); the listeners and relayed
//! connections are tasks of the node, aborted at stop.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::Api;
use kube::runtime::{WatchStreamExt, watcher};
use rustix::fd::AsFd;
use rustix::thread::LinkNameSpaceType;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use super::client::NodeError;
use super::pods::PodIps;
use crate::runtime::ipam::Cidr;
use crate::runtime::netlink::{LinkAddr, Netlink};
use crate::runtime::netns::{Netns, PodNetwork};

/// The id of the services sandbox in the pod network (a pod UID never has this form).
pub const SANDBOX_ID: &str = "probelet-services";

/// A pod's interface, as [`crate::runtime::netns`] names it.
const POD_INTERFACE: &str = "eth0";

/// The `kubernetes` Service's `ClusterIP:port`, once the proxy serves it: what pods get as
/// `KUBERNETES_SERVICE_HOST`/`PORT`.
static KUBERNETES: RwLock<Option<SocketAddrV4>> = RwLock::new(None);

/// The `kubernetes` Service's `ClusterIP:port` when this node proxies it (`None`: no pod
/// network, or the Service was not found at start).
pub fn kubernetes_service() -> Option<SocketAddrV4> {
    *KUBERNETES.read().unwrap_or_else(|e| e.into_inner())
}

fn set_kubernetes_service(addr: Option<SocketAddrV4>) {
    *KUBERNETES.write().unwrap_or_else(|e| e.into_inner()) = addr;
}

/// The pod network with Services: a pod's sandbox gets the routes to the services sandbox.
pub struct Services {
    network: Arc<PodNetwork>,
    proxy_ip: Ipv4Addr,
    cidrs: Vec<LinkAddr>,
}

impl PodIps for Services {
    fn assign(&self, uid: &str) -> Result<(String, Option<Netns>), String> {
        let assigned = self.network.assign(uid)?;
        let routed = self
            .network
            .sandbox(uid)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENOENT))
            .and_then(|s| route_services(&s.ns_path, &self.cidrs, self.proxy_ip));
        match routed {
            Ok(()) => Ok(assigned),
            Err(e) => {
                self.network.release(uid);
                Err(format!(
                    "Failed to create pod sandbox: routing the service CIDRs: {e}"
                ))
            }
        }
    }

    fn release(&self, uid: &str) {
        self.network.release(uid);
    }
}

/// Runs `f` on a scratch thread inside the network namespace mounted at `ns_path`: the
/// sockets it opens (netlink, listeners) stay in that namespace whichever thread uses them.
fn in_netns<T: Send + 'static>(
    ns_path: &Path,
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    let ns = std::fs::File::open(ns_path)?;
    std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(ns.as_fd(), Some(LinkNameSpaceType::Network))?;
        f()
    })
    .join()
    .unwrap_or_else(|_| Err(io::Error::other("the namespace thread panicked")))
}

/// Adds a route for each of `cidrs` via `proxy` to the pod sandbox at `ns_path`.
fn route_services(ns_path: &Path, cidrs: &[LinkAddr], proxy: Ipv4Addr) -> io::Result<()> {
    let cidrs = cidrs.to_vec();
    in_netns(ns_path, move || {
        let mut inside = Netlink::open()?;
        let eth0 = inside
            .link(POD_INTERFACE)?
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
        for cidr in cidrs {
            inside.add_route(cidr, eth0.index, proxy)?;
        }
        Ok(())
    })
}

/// The IPv4 service CIDRs of the cluster: its `ServiceCIDR` objects (the API server makes one
/// from `--service-cluster-ip-range`); when they cannot be read, the `kubernetes` Service's
/// ClusterIP alone (`fallback`), and `report` says why.
async fn service_cidrs(
    client: &kube::Client,
    fallback: Option<Ipv4Addr>,
    report: &(impl Fn(String) + Send),
) -> Vec<LinkAddr> {
    let api: Api<ServiceCIDR> = Api::all(client.clone());
    let listed = api.list(&Default::default()).await;
    let cidrs: Vec<LinkAddr> = match &listed {
        Ok(list) => list
            .items
            .iter()
            .filter_map(|s| s.spec.as_ref()?.cidrs.as_ref())
            .flatten()
            .filter_map(|c| c.parse::<Cidr>().ok())
            .map(|c| LinkAddr {
                addr: c.network(),
                prefix: c.prefix(),
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    if !cidrs.is_empty() {
        return cidrs;
    }
    let why = match listed {
        Ok(_) => "none has an IPv4 CIDR".to_string(),
        Err(e) => crate::display::error_chain(&e),
    };
    report(format!(
        "reading the cluster's ServiceCIDRs: {why}; pods reach only the kubernetes Service"
    ));
    fallback
        .map(|addr| LinkAddr { addr, prefix: 32 })
        .into_iter()
        .collect()
}

/// The `kubernetes` Service's ClusterIP and first TCP port, read once at start.
async fn kubernetes_cluster_ip(client: &kube::Client) -> Option<SocketAddrV4> {
    let api: Api<Service> = Api::namespaced(client.clone(), "default");
    let svc = api.get_opt("kubernetes").await.ok()??;
    let spec = svc.spec?;
    let ip = spec.cluster_ip?.parse().ok()?;
    let port = spec.ports?.first()?.port;
    Some(SocketAddrV4::new(ip, u16::try_from(port).ok()?))
}

/// Sets up the services sandbox on `network` and returns the pod network with Services, and
/// the task that keeps the proxy in step with the API (run it with the node's other tasks).
/// `api_server` is the kubeconfig's server (`host:port`), where the `kubernetes` Service goes.
pub async fn start(
    client: kube::Client,
    network: Arc<PodNetwork>,
    api_server: String,
    report: impl Fn(String) + Send + Sync + Clone + 'static,
) -> Result<(Arc<Services>, impl std::future::Future<Output = ()>), NodeError> {
    let sandbox = network
        .add_sandbox(SANDBOX_ID)
        .map_err(|e| NodeError::PodNetwork(format!("the services sandbox: {e}")))?;
    let kubernetes = kubernetes_cluster_ip(&client).await;
    let cidrs = service_cidrs(&client, kubernetes.map(|a| *a.ip()), &report).await;
    let proxy = Proxy::new(sandbox.ns_path.clone(), api_server)
        .map_err(|e| NodeError::PodNetwork(format!("the services sandbox's netlink: {e}")))?;
    set_kubernetes_service(kubernetes);
    let services = Arc::new(Services {
        network,
        proxy_ip: sandbox.ip,
        cidrs,
    });
    Ok((services, follow(client, proxy, report)))
}

/// What the proxy serves: for each `ClusterIP:port`, the backends (`host:port`).
type Table = BTreeMap<SocketAddrV4, Vec<String>>;

/// Watches Services and EndpointSlices and keeps the proxy's listeners in step, until dropped.
async fn follow(client: kube::Client, mut proxy: Proxy, report: impl Fn(String) + Send + Sync) {
    let mut services = watcher(Api::<Service>::all(client.clone()), Default::default())
        .default_backoff()
        .boxed();
    let mut slices = watcher(Api::<EndpointSlice>::all(client), Default::default())
        .default_backoff()
        .boxed();
    let mut svc_mirror = Mirror::default();
    let mut slice_mirror = Mirror::default();
    let mut error_shown = false;
    loop {
        let changed = tokio::select! {
            Some(e) = services.next() => e.map(|e| svc_mirror.absorb(e)),
            Some(e) = slices.next() => e.map(|e| slice_mirror.absorb(e)),
            else => return,
        };
        let changed = match changed {
            Ok(changed) => changed,
            Err(e) => {
                // The watchers back off and resume by themselves; say so once per outage.
                if !error_shown {
                    report(format!(
                        "watching Services and EndpointSlices: {}",
                        crate::display::error_chain(&e)
                    ));
                    error_shown = true;
                }
                continue;
            }
        };
        error_shown = false;
        if changed {
            let table = table(
                &svc_mirror.objects,
                &slice_mirror.objects,
                &proxy.api_server,
            );
            for problem in proxy.apply(table) {
                report(problem);
            }
        }
    }
}

/// The objects of a watch, by namespace and name; a relist is applied whole when it is done,
/// so a watch that restarts never empties the table in between.
struct Mirror<K> {
    objects: BTreeMap<(String, String), K>,
    relisting: Option<BTreeMap<(String, String), K>>,
}

impl<K> Default for Mirror<K> {
    fn default() -> Self {
        Mirror {
            objects: BTreeMap::new(),
            relisting: None,
        }
    }
}

impl<K: kube::Resource> Mirror<K> {
    /// Takes `event` in; whether the objects changed.
    fn absorb(&mut self, event: watcher::Event<K>) -> bool {
        let key = |k: &K| {
            let m = k.meta();
            (
                m.namespace.clone().unwrap_or_default(),
                m.name.clone().unwrap_or_default(),
            )
        };
        match event {
            watcher::Event::Init => {
                self.relisting = Some(BTreeMap::new());
                false
            }
            watcher::Event::InitApply(k) => {
                self.relisting
                    .get_or_insert_with(BTreeMap::new)
                    .insert(key(&k), k);
                false
            }
            watcher::Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                true
            }
            watcher::Event::Apply(k) => {
                self.objects.insert(key(&k), k);
                true
            }
            watcher::Event::Delete(k) => self.objects.remove(&key(&k)).is_some(),
        }
    }
}

/// What the proxy should serve: each ClusterIP Service's TCP ports, to the ready endpoints
/// of its EndpointSlices; the `kubernetes` Service of `default` to `api_server`.
fn table(
    services: &BTreeMap<(String, String), Service>,
    slices: &BTreeMap<(String, String), EndpointSlice>,
    api_server: &str,
) -> Table {
    let mut table = Table::new();
    for ((ns, name), svc) in services {
        let Some(spec) = &svc.spec else { continue };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok())
        else {
            continue; // headless (`None`), or not IPv4
        };
        let is_api = ns == "default" && name == "kubernetes";
        for port in spec.ports.iter().flatten() {
            if port.protocol.as_deref().unwrap_or("TCP") != "TCP" {
                continue;
            }
            let Ok(number) = u16::try_from(port.port) else {
                continue;
            };
            let backends = if is_api {
                vec![api_server.to_string()]
            } else {
                ready_endpoints(slices, ns, name, port.name.as_deref().unwrap_or(""))
            };
            table.insert(SocketAddrV4::new(ip, number), backends);
        }
    }
    table
}

/// The ready endpoints (`ip:port`) of Service `ns/name`'s port named `port_name`, from its
/// IPv4 EndpointSlices. An endpoint whose `ready` is unset counts as ready (the API's rule).
fn ready_endpoints(
    slices: &BTreeMap<(String, String), EndpointSlice>,
    ns: &str,
    name: &str,
    port_name: &str,
) -> Vec<String> {
    let mut out = Vec::new();
    let of_service = slices.iter().filter(|((slice_ns, _), s)| {
        slice_ns == ns
            && s.address_type == "IPv4"
            && s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("kubernetes.io/service-name"))
                .is_some_and(|n| n == name)
    });
    for (_, slice) in of_service {
        let port = slice.ports.iter().flatten().find(|p| {
            p.name.as_deref().unwrap_or("") == port_name
                && p.protocol.as_deref().unwrap_or("TCP") == "TCP"
        });
        let Some(number) = port
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for endpoint in &slice.endpoints {
            let ready = endpoint.conditions.as_ref().and_then(|c| c.ready) != Some(false);
            if !ready {
                continue;
            }
            for addr in &endpoint.addresses {
                if let Ok(ip) = addr.parse::<Ipv4Addr>() {
                    out.push(SocketAddrV4::new(ip, number).to_string());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The endpoints of one `ClusterIP:port`, taken in turn.
#[derive(Default)]
struct Backends {
    addrs: Mutex<Vec<String>>,
    next: AtomicUsize,
}

impl Backends {
    /// The backends in the order to try them: round-robin, starting one further each time.
    fn in_turn(&self) -> Vec<String> {
        let addrs = self.addrs.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if addrs.is_empty() {
            return addrs;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed) % addrs.len();
        addrs[start..]
            .iter()
            .chain(&addrs[..start])
            .cloned()
            .collect()
    }
}

/// The listeners in the services sandbox.
struct Proxy {
    ns_path: PathBuf,
    api_server: String,
    /// A netlink socket inside the services sandbox (its `lo` holds the ClusterIPs).
    inside: Netlink,
    lo: u32,
    addrs: HashSet<Ipv4Addr>,
    listeners: HashMap<SocketAddrV4, (Arc<Backends>, tokio::task::AbortHandle)>,
    tasks: JoinSet<()>,
    /// The server edge's connection cap, over every Service (src/server.rs).
    cap: Arc<Semaphore>,
    connect_timeout: Duration,
}

impl Proxy {
    fn new(ns_path: PathBuf, api_server: String) -> io::Result<Proxy> {
        let (inside, lo) = in_netns(&ns_path, || {
            let mut inside = Netlink::open()?;
            let lo = inside
                .link("lo")?
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))?;
            Ok((inside, lo.index))
        })?;
        let limits = crate::server::ServerLimits::for_this_process();
        Ok(Proxy {
            ns_path,
            api_server,
            inside,
            lo,
            addrs: HashSet::new(),
            listeners: HashMap::new(),
            tasks: JoinSet::new(),
            cap: Arc::new(Semaphore::new(limits.max_connections)),
            connect_timeout: limits.handshake_timeout,
        })
    }

    /// Serves `table`: listeners for new `ClusterIP:port`s, new backends for the others, and
    /// no listener for the ones gone. Returns what could not be done.
    fn apply(&mut self, table: Table) -> Vec<String> {
        let mut problems = Vec::new();
        self.listeners.retain(|addr, (_, task)| {
            let keep = table.contains_key(addr);
            if !keep {
                task.abort();
            }
            keep
        });
        for (addr, backends) in table {
            if let Some((current, _)) = self.listeners.get(&addr) {
                *current.addrs.lock().unwrap_or_else(|e| e.into_inner()) = backends;
                continue;
            }
            match self.listen(addr) {
                Ok(listener) => {
                    let shared = Arc::new(Backends {
                        addrs: Mutex::new(backends),
                        next: AtomicUsize::new(0),
                    });
                    let task = self.tasks.spawn(serve(
                        listener,
                        shared.clone(),
                        self.cap.clone(),
                        self.connect_timeout,
                    ));
                    self.listeners.insert(addr, (shared, task));
                }
                Err(e) => problems.push(format!("serving Service address {addr}: {e}")),
            }
        }
        problems
    }

    /// A listener on `addr` inside the services sandbox, its ClusterIP added to `lo` first.
    fn listen(&mut self, addr: SocketAddrV4) -> io::Result<TcpListener> {
        if !self.addrs.contains(addr.ip()) {
            let link_addr = LinkAddr {
                addr: *addr.ip(),
                prefix: 32,
            };
            match self.inside.add_addr(self.lo, link_addr) {
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                Err(e) => return Err(e),
            }
            self.addrs.insert(*addr.ip());
        }
        let listener = in_netns(&self.ns_path, move || {
            let l = std::net::TcpListener::bind(addr)?;
            l.set_nonblocking(true)?;
            Ok(l)
        })?;
        TcpListener::from_std(listener)
    }
}

/// Accepts connections on one `ClusterIP:port` and relays each to a backend, until aborted
/// (its connections go with it). At the connection cap a new connection is closed at once.
async fn serve(
    listener: TcpListener,
    backends: Arc<Backends>,
    cap: Arc<Semaphore>,
    connect_timeout: Duration,
) {
    let mut conns = JoinSet::new();
    let mut backoff = Duration::from_millis(5);
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, _)) => {
                    backoff = Duration::from_millis(5);
                    let Ok(permit) = cap.clone().try_acquire_owned() else {
                        continue; // At the cap: dropped, so closed.
                    };
                    let backends = backends.in_turn();
                    conns.spawn(async move {
                        relay(client, &backends, connect_timeout).await;
                        drop(permit);
                    });
                }
                Err(_) => {
                    // EMFILE and the like: back off, as the server edge does.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

/// Connects to the first of `backends` that answers within `connect_timeout` and copies both
/// ways until either side closes. With no backend answering, the client is closed.
async fn relay(mut client: TcpStream, backends: &[String], connect_timeout: Duration) {
    for backend in backends {
        let connected = tokio::time::timeout(connect_timeout, TcpStream::connect(backend)).await;
        if let Ok(Ok(mut server)) = connected {
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort};
    use kube::api::ObjectMeta;

    fn service(ns: &str, name: &str, ip: &str, ports: &[(Option<&str>, i32, &str)]) -> Service {
        Service {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some(ip.into()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(n, p, proto)| ServicePort {
                            name: n.map(str::to_string),
                            port: *p,
                            protocol: Some((*proto).into()),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn slice(
        ns: &str,
        svc: &str,
        port: (Option<&str>, i32),
        eps: &[(&str, Option<bool>)],
    ) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(format!("{svc}-abc")),
                labels: Some([("kubernetes.io/service-name".to_string(), svc.to_string())].into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            ports: Some(vec![EndpointPort {
                name: port.0.map(str::to_string),
                port: Some(port.1),
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            endpoints: eps
                .iter()
                .map(|(ip, ready)| Endpoint {
                    addresses: vec![(*ip).into()],
                    conditions: Some(EndpointConditions {
                        ready: *ready,
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
        }
    }

    fn keyed<K: kube::Resource>(items: Vec<K>) -> BTreeMap<(String, String), K> {
        items
            .into_iter()
            .map(|k| {
                let m = k.meta();
                ((m.namespace.clone().unwrap(), m.name.clone().unwrap()), k)
            })
            .collect()
    }

    #[test]
    fn i46_1_the_table_maps_tcp_cluster_ips_to_ready_endpoints_and_kubernetes_to_the_kubeconfig_server()
     {
        let services = keyed(vec![
            service(
                "default",
                "kubernetes",
                "10.0.0.1",
                &[(Some("https"), 443, "TCP")],
            ),
            service(
                "a",
                "web",
                "10.0.0.7",
                &[(Some("http"), 80, "TCP"), (Some("dns"), 53, "UDP")],
            ),
            service("a", "headless", "None", &[(None, 80, "TCP")]),
        ]);
        let slices = keyed(vec![slice(
            "a",
            "web",
            (Some("http"), 8080),
            &[
                ("10.244.0.3", Some(true)),
                ("10.244.0.4", Some(false)),
                ("10.244.0.5", None),
            ],
        )]);
        let t = table(&services, &slices, "127.0.0.1:6443");
        let api = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 443);
        let web = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 7), 80);
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), [api, web]);
        assert_eq!(t[&api], ["127.0.0.1:6443"]);
        // Not ready: left out; ready unset: counted ready.
        assert_eq!(t[&web], ["10.244.0.3:8080", "10.244.0.5:8080"]);
    }

    #[test]
    fn i46_1_backends_are_taken_in_turn() {
        let b = Backends {
            addrs: Mutex::new(vec!["a".into(), "b".into(), "c".into()]),
            next: AtomicUsize::new(0),
        };
        assert_eq!(b.in_turn(), ["a", "b", "c"]);
        assert_eq!(b.in_turn(), ["b", "c", "a"]);
        assert_eq!(b.in_turn(), ["c", "a", "b"]);
        assert!(Backends::default().in_turn().is_empty());
    }

    /// A backend on 127.0.0.1 that sends `name` to each connection, then waits for its end.
    async fn backend(name: &'static str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            loop {
                let (mut conn, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    conn.write_all(name.as_bytes()).await.unwrap();
                    let _ = conn.read_to_end(&mut Vec::new()).await;
                });
            }
        });
        addr
    }

    /// What a new connection to `addr` is sent first (empty: closed at once).
    async fn first_words(addr: std::net::SocketAddr) -> (TcpStream, String) {
        use tokio::io::AsyncReadExt;
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let mut buf = [0u8; 3];
        let n = conn.read(&mut buf).await.unwrap_or(0);
        (conn, String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    #[tokio::test]
    async fn i46_1_the_proxy_relays_in_turn_and_closes_connections_beyond_the_cap() {
        let backends = Arc::new(Backends {
            addrs: Mutex::new(vec![backend("one").await, backend("two").await]),
            next: AtomicUsize::new(0),
        });
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cap = Arc::new(Semaphore::new(2));
        let proxy = tokio::spawn(serve(listener, backends, cap, Duration::from_secs(1)));
        let (first, said) = first_words(addr).await;
        assert_eq!(said, "one");
        let (_second, said) = first_words(addr).await;
        assert_eq!(said, "two");
        // At the cap: closed at once, no backend asked.
        let (_, said) = first_words(addr).await;
        assert_eq!(said, "");
        // A relayed connection that ends frees its slot.
        drop(first);
        let said = loop {
            let (_conn, said) = first_words(addr).await;
            if !said.is_empty() {
                break said;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(said, "one");
        proxy.abort();
    }

    #[test]
    fn i46_1_a_relist_replaces_the_objects_only_when_done() {
        let mut m = Mirror::default();
        assert!(m.absorb(watcher::Event::Apply(service("a", "x", "10.0.0.2", &[]))));
        assert!(!m.absorb(watcher::Event::Init));
        assert!(!m.absorb(watcher::Event::InitApply(service(
            "a",
            "y",
            "10.0.0.3",
            &[]
        ))));
        assert_eq!(
            m.objects.len(),
            1,
            "the old objects stay until the relist is done"
        );
        assert!(m.absorb(watcher::Event::InitDone));
        assert_eq!(
            m.objects.keys().cloned().collect::<Vec<_>>(),
            [("a".to_string(), "y".to_string())]
        );
        assert!(m.absorb(watcher::Event::Delete(service("a", "y", "", &[]))));
        assert!(!m.absorb(watcher::Event::Delete(service("a", "y", "", &[]))));
    }
}

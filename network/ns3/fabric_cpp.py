"""C++ side of the ns-3 backend, compiled once per process by cppyy (cling).

Everything that runs per packet stays in C++; Python is called once per scheduled event and
once per delivered message, through two C function pointers ``void(uint64_t)`` (ctypes callbacks)
that carry an id.

``Fabric``  owns the ns-3 nodes, links and message streams of one run.
``Stream``  one direction src → dst: a persistent transport connection that carries that
            pair's messages back to back, in order. The sender keeps a FIFO of (size, id);
            the receiver counts bytes and, each time the count covers the message at the
            head, pops it and reports its id. Framing needs no bytes on the wire because
            both ends live in this process and TCP (or a single-path UDP flow over FIFO
            links) delivers bytes in order.
"""

SOURCE = r"""
#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace dtsim_ns3 {
using namespace ns3;

class Fabric;

// obj->*f as an ns-3 Callback, as MakeCallback(f, obj) but for the two comparison components
// MakeCallback stores (f and obj, each a shared_ptr'd CallbackComponent): only Callback::IsEqual
// reads them (a trace disconnect), which nothing here calls, and their instantiations were 0.8 s
// of cling's start-up. Called, copied and tested for null, the callback is MakeCallback's.
template <typename T, typename R, typename... A>
Callback<R, A...> MemberCallback(R (T::*f)(A...), T* obj) {
    return Callback<R, A...>(
        Create<CallbackImpl<R, A...>>([obj, f](A... a) -> R { return (obj->*f)(a...); }, CallbackComponentVector{}));
}

class Stream {
  public:
    Stream(Fabric* fabric, Ptr<Node> src, Ptr<Node> dst, Ipv4Address addr, uint16_t port,
           bool udp, uint32_t payload);
    void Enqueue(uint64_t bytes, uint64_t id);

  private:
    void Push();
    void Deliver();
    void OnConnected(Ptr<Socket>);
    void OnConnectFailed(Ptr<Socket>);
    void OnSendSpace(Ptr<Socket>, uint32_t) { Push(); }
    void OnAccept(Ptr<Socket> s, const Address&) {
        rx = s;
        s->SetRecvCallback(MemberCallback(&Stream::OnRecv, this));
        OnRecv(s);
    }
    void OnRecv(Ptr<Socket> s) {
        Ptr<Packet> p;
        while ((p = s->Recv())) { received += p->GetSize(); }
        Deliver();
        CheckLimits();
    }
    void CheckLimits();

    Fabric* fabric;
    bool udp;
    uint32_t payload;
    bool ready = false;
    uint64_t pending = 0;   // bytes not yet handed to the sending socket
    uint64_t received = 0;  // bytes received beyond the last delivered message
    std::deque<std::pair<uint64_t, uint64_t>> msgs;  // (bytes, id), oldest first
    Ptr<Socket> tx, rx, listener;
};

class Fabric {
  public:
    explicit Fabric(uint32_t nodes_count) {
        Ipv4AddressGenerator::Reset();
        nodes.Create(nodes_count);
        addr_first.resize(nodes_count);
    }

    void SetCallbacks(uintptr_t event, uintptr_t delivered) {
        on_event = reinterpret_cast<Hook>(event);
        on_delivered = reinterpret_cast<Hook>(delivered);
    }

    void AddLink(uint32_t a, uint32_t b, uint64_t bps, uint64_t delay_ns, uint32_t mtu, uint32_t queue) {
        PointToPointHelper p2p;
        p2p.SetDeviceAttribute("DataRate", DataRateValue(DataRate(bps)));
        p2p.SetDeviceAttribute("Mtu", UintegerValue(mtu));
        p2p.SetChannelAttribute("Delay", TimeValue(NanoSeconds(delay_ns)));
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", QueueSizeValue(QueueSize(QueueSizeUnit::PACKETS, queue)));
        links.push_back({a, b});
        devices.push_back(p2p.Install(nodes.Get(a), nodes.Get(b)));
    }

    // After the last AddLink: IP stack, one /30 per link, no queue disc, drop counters, and, unless
    // every flow gets its own route (a physical graph: UseFlowRoutes), ns-3's global routes.
    void Finish(bool global_routes) {
        InternetStackHelper().Install(nodes);
        Ipv4AddressHelper ip;
        ip.SetBase(Ipv4Address("10.0.0.0"), Ipv4Mask("255.255.255.252"));
        TrafficControlHelper tch;
        for (size_t i = 0; i < devices.size(); ++i) {
            Ipv4InterfaceContainer ifs = ip.Assign(devices[i]);
            ip.NewNetwork();
            tch.Uninstall(devices[i]);  // the link's own DropTail queue is the only queue
            auto [a, b] = links[i];
            Remember(a, b, ifs.GetAddress(1));
            Remember(b, a, ifs.GetAddress(0));
            owner[ifs.GetAddress(0).Get()] = a;
            owner[ifs.GetAddress(1).Get()] = b;
            for (uint32_t k = 0; k < 2; ++k) {
                Ptr<PointToPointNetDevice> dev = DynamicCast<PointToPointNetDevice>(devices[i].Get(k));
                Count(dev->GetQueue()->TraceConnectWithoutContext("Drop", MemberCallback(&Fabric::OnDrop, this)));
                Count(dev->TraceConnectWithoutContext("PhyRxDrop", MemberCallback(&Fabric::OnDrop, this)));
            }
        }
        // With no queue disc, a packet that finds its link's queue stopped (full) is dropped by
        // the traffic-control layer before it reaches the queue.
        for (uint32_t n = 0; n < nodes.GetN(); ++n) {
            Count(nodes.Get(n)->GetObject<TrafficControlLayer>()->TraceConnectWithoutContext(
                "TcDrop", MemberCallback(&Fabric::OnDrop, this)));
        }
        // all-pairs shortest paths and a route per link subnet in every node: 35 s and most of the
        // 3 GB at 512-1,024 GPUs, for routes a physical graph's flows never ask for
        if (global_routes) Ipv4GlobalRoutingHelper::PopulateRoutingTables();
    }

    // A physical graph: per-flow routes (FlowRouting, flow_routing_cpp.py) above ns-3's own.
    void UseFlowRoutes() {
        for (uint32_t n = 0; n < nodes.GetN(); ++n) {
            Ptr<FlowRouting> fr = CreateObject<FlowRouting>(n, &owner);
            DynamicCast<Ipv4ListRouting>(nodes.Get(n)->GetObject<Ipv4>()->GetRoutingProtocol())->AddRoutingProtocol(fr, 10);
            routers.push_back(fr);
        }
    }
    // Flow src -> dst (node ids) leaves `node` by link `link` (an AddLink index).
    void SetHop(uint32_t node, uint32_t src, uint32_t dst, uint32_t link) {
        auto [a, b] = links[link];
        uint32_t peer = a == node ? b : a;
        Ptr<NetDevice> dev = devices[link].Get(a == node ? 0 : 1);
        uint32_t iface = nodes.Get(node)->GetObject<Ipv4>()->GetInterfaceForDevice(dev);
        routers[node]->Set(src, dst, iface, addr_on_link[{node, peer}]);
    }

    // Our own event rather than Simulator::Schedule(time, &Fabric::Fire, this, id): MakeEvent's
    // std::bind machinery is 0.3 s of cling's start-up; the event is the same (Fire(id) then)
    void Schedule(uint64_t delay_ns, uint64_t id) {
        Simulator::Schedule(NanoSeconds(delay_ns), Ptr<EventImpl>(Create<FireEvent>(this, id)));
    }

    void SetTransport(bool udp_, uint32_t payload_) {
        udp = udp_;
        payload = payload_;
    }

    // One message of `bytes` (> 0) from src to dst; `id` comes back through on_delivered.
    void Send(uint32_t src, uint32_t dst, uint64_t bytes, uint64_t id) { Open(src, dst)->Enqueue(bytes, id); }

    // Open src -> dst now and send it one byte that Python never sees. Its ACK carries the
    // receiver's scaled window (a SYN-ACK's window is capped at 64 KiB), so the first real
    // message finds the connection as a long-lived one would be.
    void Warm(uint32_t src, uint32_t dst) { Open(src, dst)->Enqueue(1, kWarmup); }
    uint64_t Warmed() const { return warmed; }

    // The src -> dst stream, opened (TCP: connecting) on first use.
    Stream* Open(uint32_t src, uint32_t dst) {
        uint64_t key = (uint64_t(src) << 32) | dst;
        auto it = streams.find(key);
        if (it == streams.end()) {
            auto s = std::make_unique<Stream>(this, nodes.Get(src), nodes.Get(dst), AddressOf(dst, src),
                                              uint16_t(kPortBase + src), udp, payload);
            it = streams.emplace(key, std::move(s)).first;
        }
        return it->second.get();
    }

    // Time zero of the workload: after pre-opening connections, the clock reads from here.
    void SetOrigin() {
        origin = Simulator::Now().GetNanoSeconds();
        origin_events = Simulator::GetEventCount();
    }
    uint64_t Connected() const { return connected; }
    uint64_t Events() const { return Simulator::GetEventCount() - origin_events; }

    // Budgets for Simulator::Run (0 = none); checked on every packet batch received and every
    // call into Python, so a long transfer cannot overrun them unnoticed.
    void SetLimits(uint64_t max_events, double wall_s) {
        limit_hit = 0;
        event_budget = max_events;
        wall_budget = wall_s > 0;
        deadline = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                          std::chrono::duration<double>(wall_s));
    }
    int LimitHit() const { return limit_hit; }  // 0 none, 1 events, 2 wall time
    void CheckLimits() {
        if (event_budget && Events() >= event_budget) {
            Hit(1);
        } else if (wall_budget && !(++wall_checks & 255) && std::chrono::steady_clock::now() > deadline) {
            Hit(2);
        }
    }

    int64_t Now() const { return Simulator::Now().GetNanoSeconds() - origin; }
    uint64_t Drops() const { return drops; }
    uint32_t TraceFailures() const { return trace_failures; }  // must be 0: a renamed trace source
    uint64_t Streams() const { return streams.size(); }
    uint64_t ConnectFailures() const { return connect_failures; }
    uint64_t SendErrors() const { return send_errors; }

    static constexpr uint32_t kPortBase = 1000;  // dst listens on kPortBase + src
    static constexpr uint64_t kWarmup = ~uint64_t(0);  // the id of Warm's byte
    uint64_t connect_failures = 0, send_errors = 0, connected = 0, warmed = 0;

    void Delivered(uint64_t id) {
        if (id == kWarmup) {
            ++warmed;
            return;
        }
        on_delivered(id);
    }

  private:
    class FireEvent : public EventImpl {
      public:
        FireEvent(Fabric* fabric_, uint64_t id_) : fabric(fabric_), id(id_) {}

      private:
        void Notify() override { fabric->Fire(id); }
        Fabric* fabric;
        uint64_t id;
    };

    void Fire(uint64_t id) {
        on_event(id);
        CheckLimits();
    }
    void Hit(int what) {
        if (!limit_hit) Simulator::Stop();
        limit_hit = what;
    }
    void OnDrop(Ptr<const Packet>) { ++drops; }
    void Count(bool connected) { trace_failures += !connected; }

    void Remember(uint32_t node, uint32_t peer, Ipv4Address addr_of_peer) {
        addr_on_link[{node, peer}] = addr_of_peer;
        if (addr_first[peer] == Ipv4Address()) addr_first[peer] = addr_of_peer;
    }
    // dst's address on a link it shares with src, else its first address; routing finds the way.
    Ipv4Address AddressOf(uint32_t dst, uint32_t src) const {
        auto it = addr_on_link.find({src, dst});
        return it != addr_on_link.end() ? it->second : addr_first[dst];
    }

    NodeContainer nodes;
    std::vector<std::pair<uint32_t, uint32_t>> links;
    std::vector<NetDeviceContainer> devices;
    std::map<std::pair<uint32_t, uint32_t>, Ipv4Address> addr_on_link;
    std::vector<Ipv4Address> addr_first;
    std::unordered_map<uint32_t, uint32_t> owner;  // interface address -> node
    std::vector<Ptr<FlowRouting>> routers;
    std::map<uint64_t, std::unique_ptr<Stream>> streams;
    using Hook = void (*)(uint64_t);
    Hook on_event = nullptr, on_delivered = nullptr;
    uint64_t drops = 0;
    uint32_t trace_failures = 0;
    bool udp = false;
    uint32_t payload = 1448;
    int64_t origin = 0;
    uint64_t origin_events = 0;
    uint64_t event_budget = 0, wall_checks = 0;
    bool wall_budget = false;
    int limit_hit = 0;
    std::chrono::steady_clock::time_point deadline;
};

inline Stream::Stream(Fabric* fabric_, Ptr<Node> src, Ptr<Node> dst, Ipv4Address addr, uint16_t port,
                      bool udp_, uint32_t payload_)
    : fabric(fabric_), udp(udp_), payload(payload_) {
    InetSocketAddress local(Ipv4Address::GetAny(), port);
    Address remote = InetSocketAddress(addr, port).ConvertTo();
    if (udp) {
        rx = Socket::CreateSocket(dst, UdpSocketFactory::GetTypeId());
        rx->Bind(local.ConvertTo());
        rx->SetRecvCallback(MemberCallback(&Stream::OnRecv, this));
        tx = Socket::CreateSocket(src, UdpSocketFactory::GetTypeId());
        tx->Bind();
        tx->Connect(remote);
        ready = true;
        return;
    }
    listener = Socket::CreateSocket(dst, TcpSocketFactory::GetTypeId());
    listener->Bind(local.ConvertTo());
    listener->Listen();
    listener->SetAcceptCallback(MakeNullCallback<bool, Ptr<Socket>, const Address&>(),
                                MemberCallback(&Stream::OnAccept, this));
    tx = Socket::CreateSocket(src, TcpSocketFactory::GetTypeId());
    tx->Bind();
    tx->SetConnectCallback(MemberCallback(&Stream::OnConnected, this), MemberCallback(&Stream::OnConnectFailed, this));
    tx->SetSendCallback(MemberCallback(&Stream::OnSendSpace, this));
    tx->Connect(remote);
}

inline void Stream::CheckLimits() { fabric->CheckLimits(); }

inline void Stream::OnConnected(Ptr<Socket>) {
    ready = true;
    ++fabric->connected;
    Push();
}

inline void Stream::OnConnectFailed(Ptr<Socket>) { ++fabric->connect_failures; }

inline void Stream::Enqueue(uint64_t bytes, uint64_t id) {
    msgs.emplace_back(bytes, id);
    pending += bytes;
    Push();
}

// Hand bytes to the socket while it has room (TCP: its send buffer; UDP: one datagram at a time).
inline void Stream::Push() {
    while (ready && pending > 0) {
        uint64_t room = udp ? payload : tx->GetTxAvailable();
        uint32_t n = uint32_t(std::min<uint64_t>(pending, room));
        if (n == 0) return;  // TCP: OnSendSpace resumes when the send buffer drains
        if (tx->Send(Create<Packet>(n)) < 0) {
            ++fabric->send_errors;  // e.g. no route: the message stays in flight and is reported
            return;
        }
        pending -= n;
    }
}

inline void Stream::Deliver() {
    while (!msgs.empty() && received >= msgs.front().first) {
        auto [bytes, id] = msgs.front();
        msgs.pop_front();
        received -= bytes;
        fabric->Delivered(id);
    }
}

}  // namespace dtsim_ns3
"""

#: What Python calls, declared without any ns-3 type: the Fabric behind a pointer and the few
#: ns-3 calls the backend makes. A precompiled library (precompiled.py) then needs cling to parse
#: nothing but this: no ns-3 header (0.9 s) and none of our C++ (1.8 s with its JIT compile).
API = r"""
#include <cstdint>
#include <string>

namespace dtsim_ns3 {
class Fabric;

class Net {
  public:
    explicit Net(uint32_t nodes_count);
    ~Net();
    Net(const Net&) = delete;
    Net& operator=(const Net&) = delete;
    // Python's two hooks as C function pointers void(uint64_t) (ctypes callbacks, backend.py): a
    // std::function made from a Python callable costs cling a JIT compile (0.4 s) on first use
    void SetCallbacks(uintptr_t event, uintptr_t delivered);
    void AddLink(uint32_t a, uint32_t b, uint64_t bps, uint64_t delay_ns, uint32_t mtu, uint32_t queue);
    void Finish(bool global_routes);
    void UseFlowRoutes();
    void SetHop(uint32_t node, uint32_t src, uint32_t dst, uint32_t link);
    void Schedule(uint64_t delay_ns, uint64_t id);
    void SetTransport(bool udp, uint32_t payload);
    void Send(uint32_t src, uint32_t dst, uint64_t bytes, uint64_t id);
    void Warm(uint32_t src, uint32_t dst);
    uint64_t Warmed() const;
    void SetOrigin();
    uint64_t Connected() const;
    uint64_t Events() const;
    void SetLimits(uint64_t max_events, double wall_s);
    int LimitHit() const;
    int64_t Now() const;
    uint64_t Drops() const;
    uint32_t TraceFailures() const;
    uint64_t Streams() const;
    uint64_t ConnectFailures() const;
    uint64_t SendErrors() const;

  private:
    Fabric* fabric;
};

// TCP defaults for every socket created after it; false (nothing set) where `tcp_variant` names no
// ns-3 TCP congestion control (ns3::<tcp_variant>, a TcpCongestionOps)
bool Configure(const std::string& tcp_variant, uint32_t segment_size, uint32_t snd_buf, uint32_t rcv_buf,
               uint32_t initial_cwnd, uint64_t delayed_ack_us, uint64_t min_rto_us);
void SimulatorRun();
void SimulatorStop();
void SimulatorDestroy();
}  // namespace dtsim_ns3
"""

#: API's definitions (after SOURCE)
API_SOURCE = r"""
namespace dtsim_ns3 {
Net::Net(uint32_t nodes_count) : fabric(new Fabric(nodes_count)) {}
Net::~Net() { delete fabric; }
void Net::SetCallbacks(uintptr_t event, uintptr_t delivered) { fabric->SetCallbacks(event, delivered); }
void Net::AddLink(uint32_t a, uint32_t b, uint64_t bps, uint64_t delay_ns, uint32_t mtu, uint32_t queue) {
    fabric->AddLink(a, b, bps, delay_ns, mtu, queue);
}
void Net::Finish(bool global_routes) { fabric->Finish(global_routes); }
void Net::Schedule(uint64_t delay_ns, uint64_t id) { fabric->Schedule(delay_ns, id); }
void Net::SetTransport(bool udp, uint32_t payload) { fabric->SetTransport(udp, payload); }
void Net::Send(uint32_t src, uint32_t dst, uint64_t bytes, uint64_t id) { fabric->Send(src, dst, bytes, id); }
void Net::Warm(uint32_t src, uint32_t dst) { fabric->Warm(src, dst); }
uint64_t Net::Warmed() const { return fabric->Warmed(); }
void Net::SetOrigin() { fabric->SetOrigin(); }
uint64_t Net::Connected() const { return fabric->Connected(); }
uint64_t Net::Events() const { return fabric->Events(); }
void Net::SetLimits(uint64_t max_events, double wall_s) { fabric->SetLimits(max_events, wall_s); }
int Net::LimitHit() const { return fabric->LimitHit(); }
int64_t Net::Now() const { return fabric->Now(); }
uint64_t Net::Drops() const { return fabric->Drops(); }
uint32_t Net::TraceFailures() const { return fabric->TraceFailures(); }
uint64_t Net::Streams() const { return fabric->Streams(); }
uint64_t Net::ConnectFailures() const { return fabric->ConnectFailures(); }
uint64_t Net::SendErrors() const { return fabric->SendErrors(); }

bool Configure(const std::string& tcp_variant, uint32_t segment_size, uint32_t snd_buf, uint32_t rcv_buf,
               uint32_t initial_cwnd, uint64_t delayed_ack_us, uint64_t min_rto_us) {
    TypeId tid;
    if (!TypeId::LookupByNameFailSafe("ns3::" + tcp_variant, &tid) || !tid.IsChildOf(TcpCongestionOps::GetTypeId())) {
        return false;
    }
    Config::SetDefault("ns3::TcpL4Protocol::SocketType", TypeIdValue(tid));
    Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(segment_size));
    Config::SetDefault("ns3::TcpSocket::SndBufSize", UintegerValue(snd_buf));
    Config::SetDefault("ns3::TcpSocket::RcvBufSize", UintegerValue(rcv_buf));
    Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(initial_cwnd));
    Config::SetDefault("ns3::TcpSocket::DelAckTimeout", TimeValue(MicroSeconds(delayed_ack_us)));
    Config::SetDefault("ns3::TcpSocketBase::MinRto", TimeValue(MicroSeconds(min_rto_us)));
    Config::SetDefault("ns3::TcpSocketBase::ClockGranularity", TimeValue(MicroSeconds(1)));
    return true;
}
void SimulatorRun() { Simulator::Run(); }
void SimulatorStop() { Simulator::Stop(); }
void SimulatorDestroy() { Simulator::Destroy(); }
}  // namespace dtsim_ns3
"""

#: API's definitions that only a physical graph's run calls (backend.py: UseFlowRoutes, SetHop), apart
#: so that cling JIT-compiles them, and with them FlowRouting, only for such a run (loader.py:
#: load_flow_routing; 0.3-0.5 s of a ring's start-up)
FLOW_API_SOURCE = r"""
namespace dtsim_ns3 {
void Net::UseFlowRoutes() { fabric->UseFlowRoutes(); }
void Net::SetHop(uint32_t node, uint32_t src, uint32_t dst, uint32_t link) { fabric->SetHop(node, src, dst, link); }
}  // namespace dtsim_ns3
"""

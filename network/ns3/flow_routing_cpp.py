"""C++ routing for a physical graph on ns-3: each flow follows the path network/graph_routes.py
chose for it, so ns-3 and the analytical backends send a message over the same links.

``FlowRouting`` is an ns-3 Ipv4RoutingProtocol added to every node's Ipv4ListRouting above
ns-3's own protocols. Its table maps a flow (source node, destination node) to the interface
it leaves this node by; the source node comes from the packet's source address (or, for a
packet this node originates, the node itself). ACKs are the reverse flow and get its route.
Every pair is routed before its first packet (backend.py: route_pair), so a graph's fabric
builds no global routes (fabric_cpp.py: Finish); a flow not in the table would find no route.
Local delivery is Ipv4ListRouting's, before any protocol is asked.
"""

SOURCE = r"""
#include <unordered_map>

namespace dtsim_ns3 {
using namespace ns3;

class FlowRouting : public Ipv4RoutingProtocol {
  public:
    static TypeId GetTypeId() {
        static TypeId tid = TypeId("dtsim_ns3::FlowRouting").SetParent<Ipv4RoutingProtocol>().SetGroupName("Internet");
        return tid;
    }
    FlowRouting(uint32_t node_, const std::unordered_map<uint32_t, uint32_t>* owner_) : node(node_), owner(owner_) {}

    void Set(uint32_t src, uint32_t dst, uint32_t iface, Ipv4Address gateway) {
        table[Key(src, dst)] = {iface, gateway};
    }

    Ptr<Ipv4Route> RouteOutput(Ptr<Packet>, const Ipv4Header& h, Ptr<NetDevice>, Socket::SocketErrno& err) override {
        Ptr<Ipv4Route> r = Lookup(node, h.GetDestination());
        if (r) err = Socket::ERROR_NOTERROR;
        return r;
    }

    bool RouteInput(Ptr<const Packet> p, const Ipv4Header& h, Ptr<const NetDevice>, const UnicastForwardCallback& ucb,
                    const MulticastForwardCallback&, const LocalDeliverCallback&, const ErrorCallback&) override {
        auto src = owner->find(h.GetSource().Get());
        if (src == owner->end()) return false;
        Ptr<Ipv4Route> r = Lookup(src->second, h.GetDestination());
        if (!r) return false;
        ucb(r, p, h);
        return true;
    }

    void NotifyInterfaceUp(uint32_t) override {}
    void NotifyInterfaceDown(uint32_t) override {}
    void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
    void SetIpv4(Ptr<Ipv4> ip) override { ipv4 = ip; }
    void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override {}

  private:
    struct Hop {
        uint32_t iface;
        Ipv4Address gateway;
    };
    static uint64_t Key(uint32_t src, uint32_t dst) { return (uint64_t(src) << 32) | dst; }

    Ptr<Ipv4Route> Lookup(uint32_t src, Ipv4Address dst_addr) const {
        auto dst = owner->find(dst_addr.Get());
        if (dst == owner->end()) return nullptr;
        auto it = table.find(Key(src, dst->second));
        if (it == table.end()) return nullptr;
        Ptr<Ipv4Route> r = Create<Ipv4Route>();
        r->SetDestination(dst_addr);
        r->SetSource(ipv4->GetAddress(it->second.iface, 0).GetLocal());
        r->SetGateway(it->second.gateway);
        r->SetOutputDevice(ipv4->GetNetDevice(it->second.iface));
        return r;
    }

    uint32_t node;
    const std::unordered_map<uint32_t, uint32_t>* owner;  // address -> node, the Fabric's
    Ptr<Ipv4> ipv4;
    std::unordered_map<uint64_t, Hop> table;
};

}  // namespace dtsim_ns3
"""

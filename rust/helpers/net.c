// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for oxrdma's packet I/O abstractions; see net.h.
 */
#include <linux/igmp.h>
#include <linux/inetdevice.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <net/addrconf.h>
#include <net/flow.h>
#include <net/ip.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include <net/sock.h>

#include "net.h"

unsigned int oxrdma_ll_reserved_space(const struct net_device *ndev)
{
	return LL_RESERVED_SPACE(ndev);
}

struct sk_buff *oxrdma_alloc_skb_atomic(unsigned int size)
{
	return alloc_skb(size, GFP_ATOMIC);
}

void oxrdma_skb_reserve(struct sk_buff *skb, unsigned int len)
{
	skb_reserve(skb, len);
}

void *oxrdma_skb_put_zero(struct sk_buff *skb, unsigned int len)
{
	return skb_put_zero(skb, len);
}

void oxrdma_skb_reset_network_header(struct sk_buff *skb)
{
	skb_reset_network_header(skb);
}

unsigned char *oxrdma_skb_data(const struct sk_buff *skb)
{
	return skb->data;
}

unsigned int oxrdma_skb_len(const struct sk_buff *skb)
{
	return skb->len;
}

struct net_device *oxrdma_skb_dev(const struct sk_buff *skb)
{
	return skb->dev;
}

__be16 oxrdma_skb_protocol(const struct sk_buff *skb)
{
	return skb->protocol;
}

unsigned char *oxrdma_skb_network_header(const struct sk_buff *skb)
{
	return skb_network_header(skb);
}

int oxrdma_skb_network_offset(const struct sk_buff *skb)
{
	return skb_network_offset(skb);
}

int oxrdma_skb_linearize(struct sk_buff *skb)
{
	return skb_linearize(skb);
}

void oxrdma_kfree_skb(struct sk_buff *skb)
{
	kfree_skb(skb);
}

void oxrdma_consume_skb(struct sk_buff *skb)
{
	consume_skb(skb);
}

int oxrdma_skb_local_out(struct sk_buff *skb, struct dst_entry *dst, bool ipv6)
{
	skb->protocol = ipv6 ? htons(ETH_P_IPV6) : htons(ETH_P_IP);
	skb->dev = dst->dev;
	skb_dst_set(skb, dst_clone(dst));
	if (ipv6)
		return ip6_local_out(dev_net(dst->dev), NULL, skb);
	return ip_local_out(dev_net(dst->dev), NULL, skb);
}

int oxrdma_skb_link_out(struct sk_buff *skb, struct net_device *ndev, u16 proto, const u8 *dmac)
{
	skb->dev = ndev;
	skb->protocol = htons(proto);
	if (dev_hard_header(skb, ndev, proto, dmac, ndev->dev_addr, skb->len) < 0) {
		kfree_skb(skb);
		return -EINVAL;
	}
	return dev_queue_xmit(skb);
}

struct sk_buff *oxrdma_skb_share_check(struct sk_buff *skb)
{
	return skb_share_check(skb, GFP_ATOMIC);
}

u8 oxrdma_skb_pkt_type(const struct sk_buff *skb)
{
	return skb->pkt_type;
}

struct dst_entry *oxrdma_route_v4(struct net_device *ndev, __be32 saddr, __be32 daddr, u8 tos,
				  __be32 *out_saddr)
{
	struct flowi4 fl = {};
	struct rtable *rt;

	fl.flowi4_oif = ndev->ifindex;
	fl.flowi4_tos = tos & INET_DSCP_MASK;
	fl.flowi4_proto = IPPROTO_UDP;
	fl.saddr = saddr;
	fl.daddr = daddr;
	rt = ip_route_output_key(dev_net(ndev), &fl);
	if (IS_ERR(rt))
		return ERR_CAST(rt);
	*out_saddr = fl.saddr;
	return &rt->dst;
}

struct dst_entry *oxrdma_route_v6(struct net_device *ndev, const u8 *saddr, const u8 *daddr,
				  u8 tclass, u32 flowlabel, u8 *out_saddr)
{
#if IS_ENABLED(CONFIG_IPV6)
	struct flowi6 fl6 = {};
	struct dst_entry *dst;

	fl6.flowi6_oif = ndev->ifindex;
	fl6.flowi6_proto = IPPROTO_UDP;
	fl6.flowlabel = ip6_make_flowinfo(tclass, cpu_to_be32(flowlabel & 0xfffff));
	memcpy(&fl6.saddr, saddr, sizeof(fl6.saddr));
	memcpy(&fl6.daddr, daddr, sizeof(fl6.daddr));
	dst = ipv6_stub->ipv6_dst_lookup_flow(dev_net(ndev), NULL, &fl6, NULL);
	if (IS_ERR(dst))
		return dst;
	if (dst->error) {
		int err = dst->error;

		dst_release(dst);
		return ERR_PTR(err);
	}
	memcpy(out_saddr, &fl6.saddr, sizeof(fl6.saddr));
	return dst;
#else
	return ERR_PTR(-EAFNOSUPPORT);
#endif
}

unsigned int oxrdma_dst_mtu(const struct dst_entry *dst)
{
	return dst_mtu(dst);
}

void oxrdma_dst_hold(struct dst_entry *dst)
{
	dst_hold(dst);
}

struct net_device *oxrdma_dst_dev(const struct dst_entry *dst)
{
	return dst->dev;
}

bool oxrdma_dev_has_addr(struct net_device *ndev, const u8 *addr, bool ipv6)
{
	bool found = false;

	if (ipv6) {
#if IS_ENABLED(CONFIG_IPV6)
		found = ipv6_chk_addr(dev_net(ndev), (const struct in6_addr *)addr, ndev, 0);
#endif
	} else {
		__be32 a;

		memcpy(&a, addr, sizeof(a));
		rcu_read_lock();
		found = __ip_dev_find(dev_net(ndev), a, false) == ndev;
		rcu_read_unlock();
	}
	return found;
}

int oxrdma_ip_mc_group(struct net_device *ndev, __be32 group, bool join)
{
	struct in_device *in_dev;
	int err = -ENODEV;

	rtnl_lock();
	in_dev = __in_dev_get_rtnl(ndev);
	if (in_dev) {
		if (join)
			ip_mc_inc_group(in_dev, group);
		else
			ip_mc_dec_group(in_dev, group);
		err = 0;
	}
	rtnl_unlock();
	return err;
}

int oxrdma_ipv6_mc_group(struct net_device *ndev, const u8 *group, bool join)
{
#if IS_ENABLED(CONFIG_IPV6)
	const struct in6_addr *a = (const struct in6_addr *)group;

	return join ? ipv6_dev_mc_inc(ndev, a) : ipv6_dev_mc_dec(ndev, a);
#else
	return -EAFNOSUPPORT;
#endif
}

struct net *oxrdma_dev_net(const struct net_device *ndev)
{
	return dev_net(ndev);
}

struct net *oxrdma_maybe_get_net(struct net *net)
{
	return maybe_get_net(net);
}

void oxrdma_put_net(struct net *net)
{
	put_net(net);
}

void oxrdma_rcu_read_lock(void)
{
	rcu_read_lock();
}

void oxrdma_rcu_read_unlock(void)
{
	rcu_read_unlock();
}

void *oxrdma_sk_user_data(struct sock *sk)
{
	return rcu_dereference_sk_user_data(sk);
}

void oxrdma_skb_queue_head_init(struct sk_buff_head *list)
{
	skb_queue_head_init(list);
}

u32 oxrdma_skb_queue_len(const struct sk_buff_head *list)
{
	return skb_queue_len_lockless(list);
}

void *oxrdma_net_generic(const struct net *net, unsigned int id)
{
	void *data;

	rcu_read_lock();
	data = net_generic(net, id);
	rcu_read_unlock();
	return data;
}

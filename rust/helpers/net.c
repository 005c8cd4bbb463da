// SPDX-License-Identifier: GPL-2.0
/*
 * C helpers for oxrdma's packet I/O abstractions; see net.h.
 */
#include <linux/bvec.h>
#include <linux/igmp.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/inetdevice.h>
#include <linux/net.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/skbuff.h>
#include <linux/udp.h>
#include <net/addrconf.h>
#include <net/flow.h>
#include <net/ip.h>
#include <net/ip6_checksum.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include <net/sock.h>
#include <net/tcp.h>
#include <net/udp.h>

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

unsigned int oxrdma_skb_tailroom(const struct sk_buff *skb)
{
	return skb_tailroom(skb);
}

void oxrdma_skb_trim(struct sk_buff *skb, unsigned int len)
{
	skb_trim(skb, len);
}

void oxrdma_skb_set_udp_gso(struct sk_buff *skb, unsigned int ip_hlen, unsigned int seg_len,
			    unsigned int segs, bool ipv6)
{
	struct udphdr *uh;
	unsigned int len = skb->len - ip_hlen;

	skb_set_transport_header(skb, ip_hlen);
	uh = udp_hdr(skb);
	skb->ip_summed = CHECKSUM_PARTIAL;
	skb->csum_start = skb_transport_header(skb) - skb->head;
	skb->csum_offset = offsetof(struct udphdr, check);
	if (ipv6)
		uh->check = ~csum_ipv6_magic(&ipv6_hdr(skb)->saddr, &ipv6_hdr(skb)->daddr, len,
					     IPPROTO_UDP, 0);
	else
		uh->check = ~csum_tcpudp_magic(ip_hdr(skb)->saddr, ip_hdr(skb)->daddr, len,
					       IPPROTO_UDP, 0);
	skb_shinfo(skb)->gso_size = seg_len;
	skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
	skb_shinfo(skb)->gso_segs = segs;
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

int oxrdma_sock_bind_dev(struct socket *sock, int ifindex)
{
	return sock_bindtoindex(sock->sk, ifindex, true);
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

struct net *oxrdma_dev_get_net(const struct net_device *ndev)
{
	struct net *net;

	rcu_read_lock();
	net = maybe_get_net(dev_net(ndev));
	rcu_read_unlock();
	return net;
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

void oxrdma_udp_sock_set_reader(struct socket *sock, void *user_data,
				void (*data_ready)(struct sock *sk), int rcvbuf)
{
	struct sock *sk = sock->sk;

	sock_set_rcvbuf(sk, rcvbuf);
#ifdef CONFIG_NET_RX_BUSY_POLL
	/* skb_recv_udp() must not busy-poll a device's NAPI from inside data_ready. */
	WRITE_ONCE(sk->sk_ll_usec, 0);
#endif
	udp_set_bit(ACCEPT_L4, sk);
	write_lock_bh(&sk->sk_callback_lock);
	rcu_assign_sk_user_data(sk, user_data);
	WRITE_ONCE(sk->sk_data_ready, data_ready);
	write_unlock_bh(&sk->sk_callback_lock);
}

struct sk_buff *oxrdma_udp_recv_skb(struct sock *sk)
{
	int err;

	return skb_recv_udp(sk, MSG_DONTWAIT, &err);
}

bool oxrdma_udp_queue_empty(struct sock *sk)
{
	return skb_queue_empty_lockless(&udp_sk(sk)->reader_queue) &&
	       skb_queue_empty_lockless(&sk->sk_receive_queue);
}

bool oxrdma_sk_is_v6(const struct sock *sk)
{
	return sk->sk_family == AF_INET6;
}

void oxrdma_local_bh_disable(void)
{
	local_bh_disable();
}

void oxrdma_local_bh_enable(void)
{
	local_bh_enable();
}

unsigned int oxrdma_skb_gso_size(const struct sk_buff *skb)
{
	if (!skb_is_gso(skb) || !(skb_shinfo(skb)->gso_type & SKB_GSO_UDP_L4))
		return 0;
	return skb_shinfo(skb)->gso_size;
}

int oxrdma_skb_iif(const struct sk_buff *skb)
{
	return skb->skb_iif;
}

struct net *oxrdma_sock_net(const struct sock *sk)
{
	return sock_net(sk);
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

int oxrdma_tcp_sock_create(struct net *net, int family, struct socket **res)
{
	return __sock_create(net, family, SOCK_STREAM, IPPROTO_TCP, res, 0);
}

struct sock *oxrdma_socket_sk(struct socket *sock)
{
	return sock->sk;
}

int oxrdma_sk_state(const struct sock *sk)
{
	return READ_ONCE(sk->sk_state);
}

int oxrdma_sk_err(const struct sock *sk)
{
	return READ_ONCE(sk->sk_err);
}

u32 oxrdma_tcp_mss(const struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->mss_cache);
}

int oxrdma_sockaddr_set(struct sockaddr_storage *ss, bool v6, const u8 *ip, u16 port, u32 scope)
{
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		memcpy(&a6->sin6_addr, ip, 16);
		a6->sin6_scope_id = scope;
		return sizeof(*a6);
	}
	a4->sin_family = AF_INET;
	a4->sin_port = htons(port);
	memcpy(&a4->sin_addr, ip, 4);
	return sizeof(*a4);
}

int oxrdma_sockaddr_get(const struct sockaddr_storage *ss, u8 *ip, u16 *port, u32 *scope)
{
	memset(ip, 0, 16);
	*scope = 0;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)ss;

		memcpy(ip, &a->sin_addr, 4);
		*port = ntohs(a->sin_port);
		return 4;
	}
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;

		memcpy(ip, &a->sin6_addr, 16);
		*port = ntohs(a->sin6_port);
		*scope = a->sin6_scope_id;
		return 6;
	}
	return 0;
}

int oxrdma_sock_send(struct socket *sock, struct kvec *vec, size_t n, size_t len, bool more)
{
	struct msghdr msg = {
		.msg_flags = MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};

	return kernel_sendmsg(sock, &msg, vec, n, len);
}

int oxrdma_sock_send_pages(struct socket *sock, const struct oxrdma_page_piece *pieces, size_t n,
			   size_t len, bool more)
{
	struct bio_vec bv[OXRDMA_SEND_PAGES_MAX];
	struct msghdr msg = {
		.msg_flags = MSG_SPLICE_PAGES | MSG_DONTWAIT | MSG_NOSIGNAL | (more ? MSG_MORE : 0),
	};
	size_t i;

	if (n > OXRDMA_SEND_PAGES_MAX)
		return -EINVAL;
	for (i = 0; i < n; i++) {
		if (!sendpage_ok(pieces[i].page))
			msg.msg_flags &= ~MSG_SPLICE_PAGES;
		bvec_set_page(&bv[i], pieces[i].page, pieces[i].len, pieces[i].off);
	}
	iov_iter_bvec(&msg.msg_iter, ITER_SOURCE, bv, n, len);
	return sock_sendmsg(sock, &msg);
}

u32 oxrdma_tcp_write_seq(struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->write_seq);
}

u32 oxrdma_tcp_snd_una(struct sock *sk)
{
	return READ_ONCE(tcp_sk(sk)->snd_una);
}

void oxrdma_sk_set_nospace(struct sock *sk)
{
	struct socket *sock = READ_ONCE(sk->sk_socket);

	if (sock)
		set_bit(SOCK_NOSPACE, &sock->flags);
}

int oxrdma_sock_recv(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_DONTWAIT };
	struct kvec vec = { .iov_base = buf, .iov_len = len };

	return kernel_recvmsg(sock, &msg, &vec, 1, len, MSG_DONTWAIT);
}

struct oxrdma_read_ctx {
	size_t (*chunk)(void *data, const u8 *p, size_t len);
	void *data;
};

/* tcp_read_sock()'s actor: hands the skb's bytes to the chunk callback, mapped piece by piece. */
static int oxrdma_read_actor(read_descriptor_t *desc, struct sk_buff *skb, unsigned int offset,
			     size_t len)
{
	struct oxrdma_read_ctx *ctx = desc->arg.data;
	struct skb_seq_state st;
	unsigned int done = 0;
	const u8 *p;
	unsigned int n;

	skb_prepare_seq_read(skb, offset, offset + len, &st);
	while ((n = skb_seq_read(done, &p, &st)) != 0) {
		size_t took = ctx->chunk(ctx->data, p, n);

		done += min_t(size_t, took, n);
		if (took < n) {
			skb_abort_seq_read(&st);
			desc->count = 0;
			break;
		}
	}
	return done;
}

int oxrdma_tcp_read(struct sock *sk, size_t (*chunk)(void *data, const u8 *p, size_t len),
		    void *data)
{
	struct oxrdma_read_ctx ctx = { .chunk = chunk, .data = data };
	read_descriptor_t desc = { .arg.data = &ctx, .count = 1 };

	return tcp_read_sock(sk, &desc, oxrdma_read_actor);
}

int oxrdma_sock_read(struct socket *sock, size_t (*chunk)(void *data, const u8 *p, size_t len),
		     void *data)
{
	int r;

	lock_sock(sock->sk);
	r = oxrdma_tcp_read(sock->sk, chunk, data);
	release_sock(sock->sk);
	return r;
}

bool oxrdma_sk_input_closed(struct sock *sk)
{
	return (READ_ONCE(sk->sk_shutdown) & RCV_SHUTDOWN) &&
	       skb_queue_empty_lockless(&sk->sk_receive_queue);
}

void oxrdma_sk_install(struct sock *sk, void *user, void (*dr)(struct sock *sk),
		       void (*ws)(struct sock *sk), void (*sc)(struct sock *sk),
		       struct oxrdma_sk_saved *saved)
{
	write_lock_bh(&sk->sk_callback_lock);
	saved->data_ready = sk->sk_data_ready;
	saved->write_space = sk->sk_write_space;
	saved->state_change = sk->sk_state_change;
	__rcu_assign_sk_user_data_with_flags(sk, user, SK_USER_DATA_NOCOPY);
	sk->sk_data_ready = dr;
	sk->sk_write_space = ws;
	sk->sk_state_change = sc;
	write_unlock_bh(&sk->sk_callback_lock);
}

void oxrdma_sk_uninstall(struct sock *sk, const struct oxrdma_sk_saved *saved)
{
	write_lock_bh(&sk->sk_callback_lock);
	rcu_assign_sk_user_data(sk, NULL);
	sk->sk_data_ready = saved->data_ready;
	sk->sk_write_space = saved->write_space;
	sk->sk_state_change = saved->state_change;
	write_unlock_bh(&sk->sk_callback_lock);
}

void *oxrdma_sk_user_lock(struct sock *sk)
{
	read_lock_bh(&sk->sk_callback_lock);
	return __locked_read_sk_user_data_with_flags(sk, 0);
}

void oxrdma_sk_user_unlock(struct sock *sk)
{
	read_unlock_bh(&sk->sk_callback_lock);
}

int oxrdma_sock_accept(struct socket *sock, struct socket **newsock)
{
	return kernel_accept(sock, newsock, O_NONBLOCK);
}

int oxrdma_sock_connect(struct socket *sock, struct sockaddr_storage *ss, int len)
{
	return kernel_connect(sock, (struct sockaddr *)ss, len, O_NONBLOCK);
}

int oxrdma_sock_bind(struct socket *sock, struct sockaddr_storage *ss, int len)
{
	return kernel_bind(sock, (struct sockaddr *)ss, len);
}

int oxrdma_sock_name(struct socket *sock, struct sockaddr_storage *ss, bool peer)
{
	if (peer)
		return kernel_getpeername(sock, (struct sockaddr *)ss);
	return kernel_getsockname(sock, (struct sockaddr *)ss);
}

int oxrdma_sock_shutdown(struct socket *sock)
{
	return kernel_sock_shutdown(sock, SHUT_RDWR);
}

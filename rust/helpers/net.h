/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers for packet I/O (sk_buff, routes, UDP tunnel sockets, network namespaces): static
 * inline functions and macros of the kernel that Rust cannot call directly. Each is a thin
 * wrapper; the safety contract is the wrapped one's. See rust/abstractions/{skb,route,
 * udp_tunnel}.rs for their users.
 */
#ifndef OXRDMA_NET_HELPERS_H
#define OXRDMA_NET_HELPERS_H

#include <linux/types.h>

struct dst_entry;
struct net;
struct net_device;
struct sk_buff;
struct sk_buff_head;
struct sock;

/* LL_RESERVED_SPACE(ndev): headroom for the link-layer header, aligned. */
unsigned int oxrdma_ll_reserved_space(const struct net_device *ndev);
/* alloc_skb(size, GFP_ATOMIC) */
struct sk_buff *oxrdma_alloc_skb_atomic(unsigned int size);
/* skb_reserve(), skb_put_zero(), skb_reset_network_header() */
void oxrdma_skb_reserve(struct sk_buff *skb, unsigned int len);
void *oxrdma_skb_put_zero(struct sk_buff *skb, unsigned int len);
/* skb_tailroom(), skb_trim() */
unsigned int oxrdma_skb_tailroom(const struct sk_buff *skb);
void oxrdma_skb_trim(struct sk_buff *skb, unsigned int len);
/*
 * Marks the complete IPv4 or IPv6 packet at skb->data (network header there; @ip_hlen bytes
 * of IP header, then a UDP header whose length field covers the rest) for UDP segmentation
 * offload: transport header after the IP header, CHECKSUM_PARTIAL with the pseudo-header sum
 * in the UDP checksum field (as udp_send_skb() leaves a GSO datagram), gso_type
 * SKB_GSO_UDP_L4, gso_size @seg_len, gso_segs @segs. The stack or the device cuts it into
 * datagrams of @seg_len payload bytes (the last may be shorter), each with its own UDP and
 * IP headers (IPv4 identifications counting up from the head's) and UDP checksum.
 */
void oxrdma_skb_set_udp_gso(struct sk_buff *skb, unsigned int ip_hlen, unsigned int seg_len,
			    unsigned int segs, bool ipv6);
void oxrdma_skb_reset_network_header(struct sk_buff *skb);
/* skb->data, skb->len, skb->dev, skb->protocol (network byte order) */
unsigned char *oxrdma_skb_data(const struct sk_buff *skb);
unsigned int oxrdma_skb_len(const struct sk_buff *skb);
struct net_device *oxrdma_skb_dev(const struct sk_buff *skb);
__be16 oxrdma_skb_protocol(const struct sk_buff *skb);
/* skb_network_header(), skb_network_offset() */
unsigned char *oxrdma_skb_network_header(const struct sk_buff *skb);
int oxrdma_skb_network_offset(const struct sk_buff *skb);
/* skb_linearize() */
int oxrdma_skb_linearize(struct sk_buff *skb);
/* skb_share_check(skb, GFP_ATOMIC); skb->pkt_type */
struct sk_buff *oxrdma_skb_share_check(struct sk_buff *skb);
u8 oxrdma_skb_pkt_type(const struct sk_buff *skb);
/* kfree_skb(): free a dropped packet; consume_skb() (inline without tracepoints). */
void oxrdma_kfree_skb(struct sk_buff *skb);
void oxrdma_consume_skb(struct sk_buff *skb);

/*
 * Local output of a complete IP packet at skb->data: skb->protocol = ETH_P_IP or ETH_P_IPV6,
 * skb->dev = dst->dev, skb_dst_set(skb, dst_clone(dst)), then ip_local_out() or
 * ip6_local_out() in dev_net(dst->dev), as rxe's prepare4/6 + rxe_send do minus the header
 * building. Consumes @skb; returns what ip(6)_local_out returns.
 */
int oxrdma_skb_local_out(struct sk_buff *skb, struct dst_entry *dst, bool ipv6);

/*
 * Link-layer output of a complete network packet at skb->data through @ndev: skb->dev and
 * skb->protocol = htons(@proto), dev_hard_header() with destination @dmac and the device's
 * own address as source, then dev_queue_xmit(). Consumes @skb; returns what dev_queue_xmit
 * returns, or -EINVAL (skb freed) if no link-layer header could be built.
 */
int oxrdma_skb_link_out(struct sk_buff *skb, struct net_device *ndev, u16 proto, const u8 *dmac);

/*
 * Route lookups in dev_net(ndev) with the output interface forced to @ndev (flowi oif) and
 * protocol UDP: ip_route_output_key() / ipv6_stub->ipv6_dst_lookup_flow(). Return a dst with
 * a reference, or an ERR_PTR. The source address the lookup chose is stored at @out_saddr.
 */
struct dst_entry *oxrdma_route_v4(struct net_device *ndev, __be32 saddr, __be32 daddr, u8 tos,
				  __be32 *out_saddr);
struct dst_entry *oxrdma_route_v6(struct net_device *ndev, const u8 *saddr, const u8 *daddr,
				  u8 tclass, u32 flowlabel, u8 *out_saddr);
/* dst_mtu(), dst_hold(), dst->dev */
unsigned int oxrdma_dst_mtu(const struct dst_entry *dst);
void oxrdma_dst_hold(struct dst_entry *dst);
struct net_device *oxrdma_dst_dev(const struct dst_entry *dst);

/*
 * Whether @addr (4 or 16 bytes, network order, @ipv6 says which) is an address of @ndev now:
 * __ip_dev_find() under rcu_read_lock() / ipv6_chk_addr() with @ndev.
 */
bool oxrdma_dev_has_addr(struct net_device *ndev, const u8 *addr, bool ipv6);
/* SO_BINDTODEVICE by index (0: unbind): sock_bindtoindex(), which takes the socket lock. */
int oxrdma_sock_bind_dev(struct socket *sock, int ifindex);
/*
 * Joins (join) or leaves the IPv4 multicast group `group` (network order) on `ndev`, as a
 * socket's IP_ADD_MEMBERSHIP would: ip_mc_inc_group()/ip_mc_dec_group() under the RTNL, which
 * this takes. Process context, RTNL not held. -ENODEV without IPv4 on the device.
 */
int oxrdma_ip_mc_group(struct net_device *ndev, __be32 group, bool join);
/* The same for an IPv6 group: ipv6_dev_mc_inc()/ipv6_dev_mc_dec(). Process context. */
int oxrdma_ipv6_mc_group(struct net_device *ndev, const u8 *group, bool join);

/* dev_net(); put_net() */
struct net *oxrdma_dev_net(const struct net_device *ndev);
/*
 * A reference on @ndev's current namespace, NULL if it is being dismantled: maybe_get_net()
 * under rcu_read_lock() (a namespace is freed only after an RCU grace period from its
 * dismantling; the caller holds @ndev).
 */
struct net *oxrdma_dev_get_net(const struct net_device *ndev);
void oxrdma_put_net(struct net *net);

/* rcu_read_lock(), rcu_read_unlock(), rcu_dereference_sk_user_data() */
void oxrdma_rcu_read_lock(void);
void oxrdma_rcu_read_unlock(void);
void *oxrdma_sk_user_data(struct sock *sk);

/*
 * Makes kernel UDP socket @sock deliver to @data_ready: @user_data as its RCU-protected user
 * data and @data_ready as sk_data_ready (under sk_callback_lock), the receive buffer set to
 * @rcvbuf bytes (sock_set_rcvbuf(): takes the socket lock, process context), no busy
 * polling (sk_ll_usec 0, whatever net.core.busy_read says), and datagrams of UDP
 * segmentation offload (SKB_GSO_UDP_L4, not frag lists) queued uncut, as with the UDP_GRO
 * socket option.
 */
void oxrdma_udp_sock_set_reader(struct socket *sock, void *user_data,
				void (*data_ready)(struct sock *sk), int rcvbuf);
/* skb_recv_udp(sk, MSG_DONTWAIT, &err): the oldest queued datagram (uncharged), or NULL. */
struct sk_buff *oxrdma_udp_recv_skb(struct sock *sk);
/*
 * Whether UDP socket @sk has no datagram queued (both its queues, read without their locks:
 * order the read against earlier writes with a full barrier).
 */
bool oxrdma_udp_queue_empty(struct sock *sk);
/* Whether @sk is an IPv6 socket (sk_family). */
bool oxrdma_sk_is_v6(const struct sock *sk);
/* local_bh_disable(), local_bh_enable() */
void oxrdma_local_bh_disable(void);
void oxrdma_local_bh_enable(void);
/* The gso_size of a UDP segmentation offload skb (SKB_GSO_UDP_L4); 0 for any other skb. */
unsigned int oxrdma_skb_gso_size(const struct sk_buff *skb);
/* skb->skb_iif: the index of the device the packet arrived on. */
int oxrdma_skb_iif(const struct sk_buff *skb);
/* sock_net(sk) */
struct net *oxrdma_sock_net(const struct sock *sk);

/* skb_queue_head_init(), skb_queue_len_lockless() */
void oxrdma_skb_queue_head_init(struct sk_buff_head *list);
u32 oxrdma_skb_queue_len(const struct sk_buff_head *list);

/*
 * net_generic(): the data of pernet subsystem @id in @net (under rcu_read_lock; it stays
 * valid until the subsystem's exit for @net has run).
 */
void *oxrdma_net_generic(const struct net *net, unsigned int id);

/*
 * Kernel TCP sockets (rust/abstractions/tcp.rs).
 *
 * oxrdma_tcp_sock_create(): __sock_create(net, family, SOCK_STREAM, IPPROTO_TCP, res, 0). Not a
 * kern socket: the socket holds a reference on @net (like a process's), so the namespace
 * outlives it.
 */
struct socket;
struct sockaddr_storage;
int oxrdma_tcp_sock_create(struct net *net, int family, struct socket **res);
/* sock->sk; READ_ONCE(sk->sk_state); READ_ONCE(sk->sk_err) */
struct sock *oxrdma_socket_sk(struct socket *sock);
int oxrdma_sk_state(const struct sock *sk);
int oxrdma_sk_err(const struct sock *sk);
/* tcp_sk(sk)->mss_cache: the current effective MSS of a TCP socket. */
u32 oxrdma_tcp_mss(const struct sock *sk);
/*
 * Fills @ss with an AF_INET (@v6 false: @ip holds 4 bytes) or AF_INET6 (@ip 16 bytes, @scope
 * the scope id) address and @port (host order); returns the address length to pass along.
 */
int oxrdma_sockaddr_set(struct sockaddr_storage *ss, bool v6, const u8 *ip, u16 port, u32 scope);
/*
 * Reads an AF_INET or AF_INET6 address from @ss into @ip (16 bytes; IPv4 in the first 4),
 * @port (host order) and @scope. Returns 4 or 6 (the family), or 0 for any other family.
 */
int oxrdma_sockaddr_get(const struct sockaddr_storage *ss, u8 *ip, u16 *port, u32 *scope);
/*
 * kernel_sendmsg() of @n buffers with MSG_DONTWAIT | MSG_NOSIGNAL, and MSG_MORE if @more;
 * kernel_recvmsg() of one buffer with MSG_DONTWAIT.
 */
struct kvec;
int oxrdma_sock_send(struct socket *sock, struct kvec *vec, size_t n, size_t len, bool more);
int oxrdma_sock_recv(struct socket *sock, void *buf, size_t len);
/*
 * sock_sendmsg() of @n page pieces (@len bytes in all) with MSG_SPLICE_PAGES | MSG_DONTWAIT |
 * MSG_NOSIGNAL, and MSG_MORE if @more: the socket takes its own references on the pages and
 * sends from them. If one of them cannot be spliced (!sendpage_ok()), all are copied.
 */
struct oxrdma_page_piece {
	struct page *page;
	u32 off;
	u32 len;
};

#define OXRDMA_SEND_PAGES_MAX 16
int oxrdma_sock_send_pages(struct socket *sock, const struct oxrdma_page_piece *pieces, size_t n,
			   size_t len, bool more);
/* READ_ONCE() of tcp_sk(sk)->write_seq (the sequence after the last byte queued), snd_una. */
u32 oxrdma_tcp_write_seq(struct sock *sk);
u32 oxrdma_tcp_snd_una(struct sock *sk);
/*
 * Sets SOCK_NOSPACE on the sk's socket, if it has one: TCP calls sk_write_space on the next
 * ACK that frees queued data.
 */
void oxrdma_sk_set_nospace(struct sock *sk);
/*
 * kernel_accept(..., O_NONBLOCK); kernel_connect(..., O_NONBLOCK) (0 or -EINPROGRESS);
 * kernel_bind(); kernel_getpeername() (@peer) or kernel_getsockname() (returns the length);
 * kernel_sock_shutdown(SHUT_RDWR).
 */
int oxrdma_sock_accept(struct socket *sock, struct socket **newsock);
int oxrdma_sock_connect(struct socket *sock, struct sockaddr_storage *ss, int len);
int oxrdma_sock_bind(struct socket *sock, struct sockaddr_storage *ss, int len);
int oxrdma_sock_name(struct socket *sock, struct sockaddr_storage *ss, bool peer);
int oxrdma_sock_shutdown(struct socket *sock);

/*
 * tcp_read_sock() on @sk, which the caller holds (an sk_data_ready callback, or under
 * lock_sock()): @chunk gets the received bytes in order, piece by piece (mapped for the call
 * only), and returns how many it took; taking fewer than offered stops the read there. Returns
 * the bytes taken, or a negative errno. oxrdma_sock_read() does the same under lock_sock().
 */
int oxrdma_tcp_read(struct sock *sk, size_t (*chunk)(void *data, const u8 *p, size_t len),
		    void *data);
int oxrdma_sock_read(struct socket *sock, size_t (*chunk)(void *data, const u8 *p, size_t len),
		     void *data);
/* The peer closed its direction and every byte before its FIN was read. */
bool oxrdma_sk_input_closed(struct sock *sk);

/* The callbacks a socket had before oxrdma_sk_install() replaced them. */
struct oxrdma_sk_saved {
	void (*data_ready)(struct sock *sk);
	void (*write_space)(struct sock *sk);
	void (*state_change)(struct sock *sk);
};

/*
 * Under write_lock_bh(&sk->sk_callback_lock): saves the socket's data_ready, write_space and
 * state_change callbacks in @saved, installs @dr, @ws, @sc and sets sk_user_data to @user with
 * SK_USER_DATA_NOCOPY (so a socket accepted from a listener does not inherit it).
 * oxrdma_sk_uninstall() puts @saved back and clears sk_user_data: once it returns, no callback
 * sees @user any more.
 */
void oxrdma_sk_install(struct sock *sk, void *user, void (*dr)(struct sock *sk),
		       void (*ws)(struct sock *sk), void (*sc)(struct sock *sk),
		       struct oxrdma_sk_saved *saved);
void oxrdma_sk_uninstall(struct sock *sk, const struct oxrdma_sk_saved *saved);
/*
 * read_lock_bh(&sk->sk_callback_lock) and the user data (NULL if none);
 * oxrdma_sk_user_unlock() drops the lock. The user data stays valid in between.
 */
void *oxrdma_sk_user_lock(struct sock *sk);
void oxrdma_sk_user_unlock(struct sock *sk);

#endif

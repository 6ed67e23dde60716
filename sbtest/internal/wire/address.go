package wire

import (
	"net/url"
	"strings"
)

// Link addresses. Clients spell the node they attach to in several ways, and the server
// takes them all, as the service does:
//
//   - the entity path ("orders", "t/Subscriptions/s/$DeadLetterQueue"): the Go, .NET
//     and JavaScript SDKs;
//   - an absolute URI ("amqps://host/orders"): the Python SDK (azure-servicebus 7.x
//     _entity_uri), whose uamqp drops the port (uamqp address.py Address: scheme,
//     hostname and path);
//   - the special segments in any letter case: the Java SDK sends "t/subscriptions/s"
//     and "/$deadletterqueue" (azure-messaging-servicebus ServiceBusClientBuilder
//     SUBSCRIPTION_ENTITY_PATH_FORMAT, DEAD_LETTER_QUEUE_NAME_SUFFIX);
//   - entity names in any letter case ("Naming rules and restrictions for Azure
//     resources": resource names are case-insensitive), with or without surrounding
//     slashes.
//
// linkAddress does the spelling; Broker.ResolvePath the letter case of names.

// specialSegments are the node names of an address, in the server's spelling.
var specialSegments = []string{"Subscriptions", "$DeadLetterQueue", "$Transfer", "$management", "$cbs"}

// linkAddress returns the node path of a link address: without the scheme and host of a
// URI address, without leading and trailing slashes, with its special segments in the
// server's spelling. Entity names keep their case.
func linkAddress(addr string) string {
	if _, rest, ok := strings.Cut(addr, "://"); ok {
		_, addr, _ = strings.Cut(rest, "/")
	}
	addr = strings.Trim(addr, "/")
	segs := strings.Split(addr, "/")
	for i, seg := range segs {
		for _, sp := range specialSegments {
			// "Subscriptions" only between a topic and a subscription name.
			if strings.EqualFold(seg, sp) && (sp != "Subscriptions" || (i > 0 && i < len(segs)-1)) {
				segs[i] = sp
			}
		}
	}
	return strings.Join(segs, "/")
}

// nodePath splits a node path into its entity path and the suffix after it: a
// sub-queue, $management, or both.
func nodePath(path string) (entity, suffix string) {
	entity = strings.TrimSuffix(path, mgmtNodeSuffix)
	suffix = path[len(entity):]
	if e, sub := splitSubQueue(entity); sub != 0 {
		suffix = entity[len(e):] + suffix
		entity = e
	}
	return entity, suffix
}

// resolveAddress returns the node path a link address names in ns: linkAddress's
// spelling, with the entity's name as ns has it when only the letter case differs.
func resolveAddress(ns Broker, addr string) string {
	path := linkAddress(addr)
	if path == cbsNode {
		return path
	}
	entity, suffix := nodePath(path)
	return ns.ResolvePath(entity) + suffix
}

// maxAuthorities bounds the token audiences' authorities a connection remembers; a
// client uses one namespace.
const maxAuthorities = 4

// noteAudience remembers the authority (host and port) of a token audience the client
// put on $cbs, as the client spells it.
func (c *srvConn) noteAudience(audience string) {
	u, err := url.Parse(audience)
	if err != nil || u.Host == "" || u.Port() == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.authorities == nil {
		c.authorities = make(map[string]string)
	}
	host := strings.ToLower(u.Hostname())
	if _, ok := c.authorities[host]; !ok && len(c.authorities) >= maxAuthorities {
		clear(c.authorities)
	}
	c.authorities[host] = u.Host
}

// echoAddress is addr as the server's attach echoes it: unchanged, except a URI address
// without a port whose host the client's token audiences named with one, which gets that
// port back. The Python SDK compares the source its session receiver gets back with
// amqps://<host:port>/<entity> as it spelled it (azure-servicebus 7.x receiver_mixins.py
// _on_attach, which otherwise leaves the session's id and lock expiry unknown), while
// uamqp sent the address without the port; the token audience keeps it.
func (c *srvConn) echoAddress(addr string) string {
	u, err := url.Parse(addr)
	if err != nil || u.Scheme == "" || u.Host == "" || u.Port() != "" {
		return addr
	}
	c.mu.Lock()
	authority, ok := c.authorities[strings.ToLower(u.Hostname())]
	c.mu.Unlock()
	if !ok {
		return addr
	}
	scheme, rest, _ := strings.Cut(addr, "://")
	_, path, _ := strings.Cut(rest, "/")
	return scheme + "://" + authority + "/" + path
}

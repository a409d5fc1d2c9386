// statuspeer: a real status-go v0.50.0 Waku node (waku/0, status-go's `waku` package on its go-ethereum fork
// v1.9.5-status.9), driven by a small script, for Mailmesh's interop tests (docs/interop.md).
//
// Envelopes are built, sealed and opened by status-go's code; history requests are sent by status-go's own
// client functions — Waku.RequestHistoricMessagesWithTimeout with the envelope-wrapped request exactly as
// services/wakuext RequestMessages builds it (the deprecated "status-envelope" dialect), or
// Waku.SendMessagesRequest (the plain MessagesRequest) — and completions are status-go's own parse of the 0x7d
// (EventMailServerRequestCompleted). Optionally status-go's mailserver (mailserver.WakuMailServer, LevelDB)
// archives and answers requests. Output: JSON lines on stdout (key "event"), as tools/interop/gethpeer.
//
// Commands (from -do flags, else stdin; exit 0 at the end / EOF / "quit", 1 when a command fails):
//
//	wait-peer TIMEOUT_S
//	post COUNT                                     seal and Send COUNT envelopes (-topic, -ttl, -pow, -password)
//	request LOWER UPPER TOPIC|full LIMIT [CURSOR]  envelope-wrapped request (wakuext RequestMessages)
//	request-plain LOWER UPPER TOPIC LIMIT [CURSOR] MessagesRequest (Waku.SendMessagesRequest)
//	wait-complete TIMEOUT_S                        until status-go reports the last request completed
//	wait-messages N TIMEOUT_S                      until the filter delivered N distinct envelopes not ours
//	quit
package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/p2p/enode"
	"github.com/ethereum/go-ethereum/rlp"
	"github.com/status-im/status-go/mailserver"
	"github.com/status-im/status-go/params"
	"github.com/status-im/status-go/waku"
)

// StatusGoVersion is the status-go module version this program is built against (go.mod).
const StatusGoVersion = "v0.50.0"

type out struct{ mu sync.Mutex }

func (o *out) emit(event string, fields map[string]interface{}) {
	if fields == nil {
		fields = map[string]interface{}{}
	}
	fields["event"] = event
	fields["ts"] = float64(time.Now().UnixNano()/1e6) / 1000.0
	line, err := json.Marshal(fields)
	if err != nil {
		line = []byte(fmt.Sprintf(`{"event":"error","error":%q}`, err.Error()))
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

var stdout out

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, "; ") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

type settings struct {
	listen, nodeKey, password, msDir, msPassword, payload, name string
	dial, do                                                    multiFlag
	topic                                                       waku.TopicType
	ttl, workTime                                               uint
	pow, minPow                                                 float64
	confirmations                                               bool
	verbosity                                                   int
}

func parseFlags() (*settings, error) {
	s := &settings{}
	var topic string
	flag.StringVar(&s.listen, "listen", "127.0.0.1:0", "RLPx listen address (port 0 = any; empty = do not listen)")
	flag.StringVar(&s.nodeKey, "nodekey", "", "node key, 64 hex chars (default: a fresh key)")
	flag.Var(&s.dial, "dial", "enode URL to keep connected (static peer); repeatable")
	flag.Var(&s.do, "do", "a command (see the source header); repeatable; none = read commands from stdin")
	flag.StringVar(&topic, "topic", "0x57a70001", "topic of posted envelopes and of the filter (4 bytes hex)")
	flag.UintVar(&s.ttl, "ttl", 120, "TTL of posted envelopes, seconds")
	flag.Float64Var(&s.pow, "pow", waku.DefaultMinimumPoW, "PoW target of posted envelopes")
	flag.UintVar(&s.workTime, "work-time", 10, "seconds allowed to seal one envelope")
	flag.Float64Var(&s.minPow, "min-pow", waku.DefaultMinimumPoW, "this node's PoW requirement (status-go default 0.2)")
	flag.StringVar(&s.password, "password", "mailmesh-interop", "password of the symmetric key of posts and the filter")
	flag.StringVar(&s.payload, "payload", "status-go interop", "payload prefix of posted messages (\" #<n>\" is appended)")
	flag.StringVar(&s.msPassword, "mailserver-password", "status-offline-inbox", "mailserver password (our requests; our mailserver)")
	flag.StringVar(&s.msDir, "mailserver", "", "run status-go's mailserver with its LevelDB in this directory")
	flag.BoolVar(&s.confirmations, "confirmations", false, "EnableConfirmations: answer Messages with Message Response + Batch Ack")
	flag.StringVar(&s.name, "name", "", "devp2p client name")
	flag.IntVar(&s.verbosity, "verbosity", 2, "go-ethereum log level on stderr (0 silent … 5 trace)")
	flag.Parse()
	raw, err := hex.DecodeString(strings.TrimPrefix(topic, "0x"))
	if err != nil || len(raw) != waku.TopicLength {
		return nil, fmt.Errorf("-topic: want 4 bytes of hex, got %q", topic)
	}
	s.topic = waku.BytesToTopic(raw)
	return s, nil
}

func main() {
	s, err := parseFlags()
	if err != nil {
		stdout.emit("error", map[string]interface{}{"error": err.Error()})
		os.Exit(2)
	}
	log.Root().SetHandler(log.LvlFilterHandler(log.Lvl(s.verbosity), log.StreamHandler(os.Stderr, log.TerminalFormat(false))))
	node, err := start(s)
	if err != nil {
		stdout.emit("error", map[string]interface{}{"error": err.Error()})
		os.Exit(1)
	}
	code := node.run(s.do)
	node.stop()
	stdout.emit("exit", map[string]interface{}{"code": code})
	os.Exit(code)
}

type completion struct {
	last, cursor, err string
}

type statusPeer struct {
	s      *settings
	srv    *p2p.Server
	w      *waku.Waku
	ms     *mailserver.WakuMailServer
	key    *ecdsa.PrivateKey
	symKey []byte
	msKey  []byte
	filter *waku.Filter
	quitFn chan struct{}

	mu          sync.Mutex
	changed     *sync.Cond
	ready       []*p2p.Peer
	sessions    map[enode.ID]bool
	posted      map[string]bool
	delivered   map[string]bool
	completed   map[string]completion // by request ID (hex), status-go's EventMailServerRequestCompleted
	lastRequest string
	page        []string // 0x7f envelope hashes received since the last request was sent
}

func start(s *settings) (*statusPeer, error) {
	g := &statusPeer{s: s, sessions: map[enode.ID]bool{}, posted: map[string]bool{}, delivered: map[string]bool{},
		completed: map[string]completion{}, quitFn: make(chan struct{})}
	g.changed = sync.NewCond(&g.mu)
	var err error
	if s.nodeKey != "" {
		g.key, err = crypto.HexToECDSA(s.nodeKey)
	} else {
		g.key, err = crypto.GenerateKey()
	}
	if err != nil {
		return nil, fmt.Errorf("node key: %v", err)
	}
	cfg := waku.DefaultConfig
	cfg.MinimumAcceptedPoW = s.minPow
	cfg.EnableConfirmations = s.confirmations
	g.w = waku.New(&cfg, nil)
	id, err := g.w.AddSymKeyFromPassword(s.password)
	if err != nil {
		return nil, err
	}
	g.symKey, _ = g.w.GetSymKey(id)
	msID, err := g.w.AddSymKeyFromPassword(s.msPassword)
	if err != nil {
		return nil, err
	}
	g.msKey, _ = g.w.GetSymKey(msID)
	if s.msDir != "" {
		g.ms = &mailserver.WakuMailServer{}
		wcfg := &params.WakuConfig{Enabled: true, EnableMailServer: true, DataDir: s.msDir,
			MailServerPassword: s.msPassword, MinimumPoW: 0}
		if err := g.ms.Init(g.w, wcfg); err != nil {
			return nil, fmt.Errorf("mailserver: %v", err)
		}
		g.w.RegisterMailServer(g.ms)
	}
	g.filter = &waku.Filter{KeySym: g.symKey, Topics: [][]byte{s.topic[:]}, AllowP2P: true,
		Messages: waku.NewMemoryMessageStore()}
	if _, err := g.w.Subscribe(g.filter); err != nil {
		return nil, fmt.Errorf("filter: %v", err)
	}
	events := make(chan waku.EnvelopeEvent, 256)
	g.w.SubscribeEnvelopeEvents(events)
	go g.watchEnvelopeEvents(events)

	protocols := g.w.Protocols()
	for i := range protocols {
		run := protocols[i].Run
		protocols[i].Run = func(peer *p2p.Peer, rw p2p.MsgReadWriter) error {
			return run(peer, g.wrap(peer, rw))
		}
	}
	name := s.name
	if name == "" {
		name = fmt.Sprintf("Statusd/%s/%s-%s/%s", StatusGoVersion, runtime.GOOS, runtime.GOARCH, runtime.Version())
	}
	g.srv = &p2p.Server{Config: p2p.Config{
		PrivateKey: g.key, MaxPeers: 10, NoDiscovery: true, Name: name, ListenAddr: s.listen,
		Protocols: protocols, Logger: log.Root(),
	}}
	if err := g.w.Start(g.srv); err != nil {
		return nil, err
	}
	peerEvents := make(chan *p2p.PeerEvent, 64)
	sub := g.srv.SubscribeEvents(peerEvents)
	if err := g.srv.Start(); err != nil {
		return nil, fmt.Errorf("p2p server: %v", err)
	}
	go g.watchPeers(peerEvents, sub.Err())
	go g.pollFilter()
	for _, url := range s.dial {
		n, err := enode.ParseV4(url)
		if err != nil {
			return nil, fmt.Errorf("-dial %q: %v", url, err)
		}
		g.srv.AddPeer(n)
	}
	self := g.srv.Self()
	stdout.emit("started", map[string]interface{}{
		"enode": self.URLv4(), "id": hex.EncodeToString(self.ID().Bytes()),
		"pubkey": hex.EncodeToString(crypto.FromECDSAPub(&g.key.PublicKey)[1:]), "listen": g.srv.ListenAddr,
		"status_go": StatusGoVersion, "go": runtime.Version(), "client": name, "min_pow": s.minPow,
		"mailserver": s.msDir != "", "topic": "0x" + hex.EncodeToString(s.topic[:]), "caps": capNames(protocols),
	})
	return g, nil
}

func capNames(ps []p2p.Protocol) []string {
	names := []string{}
	for _, p := range ps {
		names = append(names, fmt.Sprintf("%s/%d", p.Name, p.Version))
	}
	return names
}

func (g *statusPeer) stop() {
	close(g.quitFn)
	g.srv.Stop()
	_ = g.w.Stop()
	if g.ms != nil {
		g.ms.Close()
	}
}

func (g *statusPeer) watchPeers(events chan *p2p.PeerEvent, errc <-chan error) {
	for {
		select {
		case ev := <-events:
			switch ev.Type {
			case p2p.PeerEventTypeAdd:
				stdout.emit("peer-added", map[string]interface{}{"id": ev.Peer.String(), "remote": ev.RemoteAddress})
			case p2p.PeerEventTypeDrop:
				g.mu.Lock()
				delete(g.sessions, ev.Peer)
				g.changed.Broadcast()
				g.mu.Unlock()
				stdout.emit("peer-dropped", map[string]interface{}{"id": ev.Peer.String(), "error": ev.Error})
			}
		case <-errc:
			return
		case <-g.quitFn:
			return
		}
	}
}

// watchEnvelopeEvents reports status-go's own view of the mailserver exchange (its parse of our 0x7d).
func (g *statusPeer) watchEnvelopeEvents(events chan waku.EnvelopeEvent) {
	for {
		select {
		case <-g.quitFn:
			return
		case ev := <-events:
			fields := map[string]interface{}{"type": string(ev.Event), "hash": hex.EncodeToString(ev.Hash[:]),
				"peer": ev.Peer.String()}
			if ev.Event == waku.EventMailServerRequestCompleted {
				c := completion{}
				if resp, ok := ev.Data.(*waku.MailServerResponse); ok && resp != nil {
					c.last = hex.EncodeToString(resp.LastEnvelopeHash[:])
					c.cursor = hex.EncodeToString(resp.Cursor)
					if resp.Error != nil {
						c.err = resp.Error.Error()
					}
				}
				fields["last"], fields["cursor"], fields["error"] = c.last, c.cursor, c.err
				g.mu.Lock()
				g.completed[fields["hash"].(string)] = c
				g.changed.Broadcast()
				g.mu.Unlock()
			}
			stdout.emit("envelope-event", fields)
		}
	}
}

func (g *statusPeer) pollFilter() {
	ticker := time.NewTicker(20 * time.Millisecond)
	defer ticker.Stop()
	for {
		select {
		case <-g.quitFn:
			return
		case <-ticker.C:
		}
		for _, m := range g.filter.Retrieve() {
			h := hex.EncodeToString(m.EnvelopeHash[:])
			g.mu.Lock()
			own := g.posted[h]
			g.mu.Unlock()
			src := ""
			if m.Src != nil {
				src = hex.EncodeToString(crypto.FromECDSAPub(m.Src)[1:])
			}
			// Printed before it counts, so a wait-messages "done" line follows every message it counted.
			stdout.emit("message", map[string]interface{}{
				"hash": h, "own": own, "p2p": m.P2P, "payload": string(m.Payload), "src": src, "sent": m.Sent, "ttl": m.TTL,
				"topic": "0x" + hex.EncodeToString(m.Topic[:]), "pow": m.PoW,
			})
			if !own {
				g.mu.Lock()
				g.delivered[h] = true
				g.changed.Broadcast()
				g.mu.Unlock()
			}
		}
	}
}

func (g *statusPeer) run(do []string) int {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	commands := make(chan string)
	go func() {
		defer close(commands)
		if len(do) > 0 {
			for _, c := range do {
				commands <- c
			}
			return
		}
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			commands <- scanner.Text()
		}
	}()
	for {
		select {
		case sig := <-signals:
			stdout.emit("signal", map[string]interface{}{"signal": sig.String()})
			return 0
		case line, ok := <-commands:
			if !ok {
				return 0
			}
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			if fields[0] == "quit" {
				return 0
			}
			result, err := g.command(fields)
			if err != nil {
				stdout.emit("error", map[string]interface{}{"cmd": line, "error": err.Error()})
				return 1
			}
			if result == nil {
				result = map[string]interface{}{}
			}
			result["cmd"] = line
			stdout.emit("done", result)
		}
	}
}

func argUint(f []string, i int) (uint32, error) {
	if len(f) <= i {
		return 0, fmt.Errorf("%s: missing argument %d", f[0], i)
	}
	v, err := strconv.ParseUint(f[i], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%s: argument %d: %v", f[0], i, err)
	}
	return uint32(v), nil
}

func argSeconds(f []string, i int) (time.Duration, error) {
	if len(f) <= i {
		return 0, fmt.Errorf("%s: missing timeout (seconds)", f[0])
	}
	v, err := strconv.ParseFloat(f[i], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: timeout: %v", f[0], err)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func (g *statusPeer) command(f []string) (map[string]interface{}, error) {
	switch f[0] {
	case "wait-peer":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, "a ready waku peer", func() bool { return len(g.ready) > 0 }); err != nil {
			return nil, err
		}
		return map[string]interface{}{"id": g.lastReady().ID().String()}, nil
	case "post":
		n, err := argUint(f, 1)
		if err != nil {
			return nil, err
		}
		return g.post(int(n))
	case "request", "request-plain":
		if len(f) < 5 {
			return nil, fmt.Errorf("%s LOWER UPPER TOPIC|full LIMIT [CURSOR]", f[0])
		}
		lower, err := argUint(f, 1)
		if err != nil {
			return nil, err
		}
		upper, err := argUint(f, 2)
		if err != nil {
			return nil, err
		}
		limit, err := argUint(f, 4)
		if err != nil {
			return nil, err
		}
		var cursor []byte
		if len(f) > 5 {
			if cursor, err = hex.DecodeString(f[5]); err != nil {
				return nil, fmt.Errorf("%s: cursor: %v", f[0], err)
			}
		}
		var topics []waku.TopicType
		if f[3] != "full" {
			raw, err := hex.DecodeString(strings.TrimPrefix(f[3], "0x"))
			if err != nil || len(raw) != waku.TopicLength {
				return nil, fmt.Errorf("%s: bad topic %q", f[0], f[3])
			}
			topics = append(topics, waku.BytesToTopic(raw))
		}
		if f[0] == "request" {
			return g.requestEnvelope(lower, upper, topics, limit, cursor)
		}
		return g.requestPlain(lower, upper, topics, limit, cursor)
	case "wait-complete":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		id := g.lastRequest
		g.mu.Unlock()
		if err := g.waitFor(d, "completion of request "+id, func() bool { _, ok := g.completed[id]; return ok }); err != nil {
			return nil, err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		c := g.completed[id]
		return map[string]interface{}{"request": id, "last": c.last, "cursor": c.cursor, "error": c.err,
			"envelopes": append([]string{}, g.page...)}, nil
	case "wait-messages":
		n, err := argUint(f, 1)
		if err != nil {
			return nil, err
		}
		d, err := argSeconds(f, 2)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, fmt.Sprintf("%d envelopes", n), func() bool { return len(g.delivered) >= int(n) }); err != nil {
			return nil, err
		}
		return map[string]interface{}{"count": n}, nil
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

func (g *statusPeer) waitFor(d time.Duration, what string, cond func() bool) error {
	timer := time.AfterFunc(d, func() {
		g.mu.Lock()
		g.changed.Broadcast()
		g.mu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(d)
	g.mu.Lock()
	defer g.mu.Unlock()
	for !cond() {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s", d, what)
		}
		g.changed.Wait()
	}
	return nil
}

func (g *statusPeer) lastReady() *p2p.Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.ready) - 1; i >= 0; i-- {
		if g.sessions[g.ready[i].ID()] {
			return g.ready[i]
		}
	}
	return nil
}

func (g *statusPeer) post(n int) (map[string]interface{}, error) {
	hashes := make([]string, 0, n)
	for i := 0; i < n; i++ {
		params := waku.MessageParams{
			TTL: uint32(g.s.ttl), Src: g.key, KeySym: g.symKey, Topic: g.s.topic, PoW: g.s.pow,
			WorkTime: uint32(g.s.workTime), Payload: []byte(fmt.Sprintf("%s #%d", g.s.payload, i)),
		}
		msg, err := waku.NewSentMessage(&params)
		if err != nil {
			return nil, err
		}
		env, err := msg.Wrap(&params, time.Now())
		if err != nil {
			return nil, err
		}
		raw, err := rlp.EncodeToBytes(env)
		if err != nil {
			return nil, err
		}
		h := hex.EncodeToString(env.Hash().Bytes())
		g.mu.Lock()
		g.posted[h] = true
		g.mu.Unlock()
		if err := g.w.Send(env); err != nil {
			return nil, fmt.Errorf("Send: %v", err)
		}
		hashes = append(hashes, h)
		stdout.emit("posted", map[string]interface{}{
			"hash": h, "raw": hex.EncodeToString(raw), "expiry": env.Expiry, "ttl": env.TTL,
			"sent": env.Expiry - env.TTL, "topic": "0x" + hex.EncodeToString(env.Topic[:]), "nonce": env.Nonce,
			"pow": env.PoW(), "payload": string(params.Payload),
		})
	}
	return map[string]interface{}{"count": n, "hashes": hashes}, nil
}

// messagesRequestPayload is status-go v0.50.0's own mailserver.MessagesRequestPayload (mailserver/request.go),
// the RLP inside the envelope-wrapped request, as ext.MakeMessagesRequestPayload fills it.
type messagesRequestPayload = mailserver.MessagesRequestPayload

func topicsToBloom(topics []waku.TopicType) []byte {
	if len(topics) == 0 {
		return waku.MakeFullNodeBloom()
	}
	i := new(big.Int) // services/ext createBloomFilter / topicsToBloom
	for _, t := range topics {
		i.Or(i, new(big.Int).SetBytes(waku.TopicToBloom(t)))
	}
	combined := make([]byte, waku.BloomFilterSize)
	data := i.Bytes()
	copy(combined[waku.BloomFilterSize-len(data):], data)
	return combined
}

// requestEnvelope: services/wakuext RequestMessages → ext.MakeMessagesRequestPayload → makeEnvelop →
// Waku.RequestHistoricMessagesWithTimeout (v0.50.0): payload [Lower, Upper, Bloom, Topics(nil), Limit,
// Cursor, Batch=true], symmetric with the mailserver key, signed with the node key, PoW = our MinPow,
// WorkTime 5 s, TTL default (50 s); the request ID is the envelope hash.
func (g *statusPeer) requestEnvelope(lower, upper uint32, topics []waku.TopicType, limit uint32, cursor []byte) (map[string]interface{}, error) {
	p := g.lastReady()
	if p == nil {
		return nil, fmt.Errorf("request: no ready peer")
	}
	payload, err := rlp.EncodeToBytes(messagesRequestPayload{
		Lower: lower, Upper: upper, Bloom: topicsToBloom(topics), Limit: limit, Cursor: cursor, Batch: true,
	})
	if err != nil {
		return nil, err
	}
	params := waku.MessageParams{PoW: g.w.MinPow(), Payload: payload, WorkTime: 5, Src: g.key, KeySym: g.msKey}
	msg, err := waku.NewSentMessage(&params)
	if err != nil {
		return nil, err
	}
	env, err := msg.Wrap(&params, time.Now())
	if err != nil {
		return nil, err
	}
	id := hex.EncodeToString(env.Hash().Bytes())
	g.mu.Lock()
	g.lastRequest, g.page = id, nil
	g.mu.Unlock()
	pid := p.ID()
	if err := g.w.RequestHistoricMessagesWithTimeout(pid[:], env, 30*time.Second); err != nil {
		return nil, err
	}
	return map[string]interface{}{"request": id, "pow": env.PoW(), "payload": hex.EncodeToString(payload)}, nil
}

// requestPlain: Waku.SendMessagesRequest with a MessagesRequest as later status-go clients build it
// (protocol/transport: ID = 32 random bytes, Topics set, Bloom empty).
func (g *statusPeer) requestPlain(lower, upper uint32, topics []waku.TopicType, limit uint32, cursor []byte) (map[string]interface{}, error) {
	p := g.lastReady()
	if p == nil {
		return nil, fmt.Errorf("request-plain: no ready peer")
	}
	id := make([]byte, common.HashLength)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	req := waku.MessagesRequest{ID: id, From: lower, To: upper, Limit: limit, Cursor: cursor}
	for _, t := range topics {
		req.Topics = append(req.Topics, append([]byte{}, t[:]...))
	}
	if len(topics) == 0 {
		req.Bloom = waku.MakeFullNodeBloom()
	}
	g.mu.Lock()
	g.lastRequest, g.page = hex.EncodeToString(id), nil
	g.mu.Unlock()
	pid := p.ID()
	if err := g.w.SendMessagesRequest(pid[:], req); err != nil {
		return nil, err
	}
	return map[string]interface{}{"request": hex.EncodeToString(id)}, nil
}

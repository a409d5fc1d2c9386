// gethpeer: a real go-ethereum v1.9.20 Whisper v6 (shh/6) node, driven by a small script, for Mailmesh's
// interop tests (docs/interop.md).
//
// It runs geth's own p2p.Server (RLPx) and whisperv6.Whisper — no re-implementation: envelopes are built,
// sealed and opened by geth's code; history requests are sent with Whisper.RequestHistoricMessages exactly as
// geth's cmd/wnode does (the geth-binary dialect: Lower ‖ Upper ‖ Bloom, symmetric-encrypted with the
// mailserver password's key, signed); optionally geth's own whisper/mailserver (LevelDB) archives and answers
// requests. Everything observable is printed on stdout as JSON lines (one object per line, key "event").
//
// Commands come from -do flags (in order) or, if there are none, from stdin (one per line); the process exits
// 0 after the last command (or at EOF / "quit"), 1 when a command fails ({"event":"error",...}), 2 on bad
// arguments. Commands:
//
//	wait-peer TIMEOUT_S              until a shh/6 session has finished its Status handshake
//	post COUNT                       seal COUNT envelopes (-topic, -ttl, -pow, -password/-sym-key, signed) and Send
//	request LOWER UPPER [TOPIC|full] 0x7e to the last ready peer, as cmd/wnode builds it (mailserver key,
//	                                 -request-pow; UPPER 0 = 0xFFFFFFFF, as wnode)
//	wait-messages N TIMEOUT_S        until the filter has delivered N distinct envelopes not posted by us
//	wait-p2p N TIMEOUT_S             until N distinct envelopes arrived in 0x7f packets
//	wait-complete TIMEOUT_S          until a 0x7d (P2P request complete) arrived (geth itself ignores code 125)
//	quit                             exit 0
package main

import (
	"bufio"
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
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
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/whisper/mailserver"
	whisper "github.com/ethereum/go-ethereum/whisper/whisperv6"
)

// out prints one JSON object per line; safe from any goroutine.
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
	listen, nodeKey, password, symKey, msDir, msPassword, bloom, name string
	dial                                                              multiFlag
	do                                                                multiFlag
	topic                                                             whisper.TopicType
	ttl, workTime                                                     uint
	pow, minPow, requestPow, msPow                                    float64
	verbosity                                                         int
	payload                                                           string
}

func parseFlags() (*settings, error) {
	s := &settings{}
	var topic string
	flag.StringVar(&s.listen, "listen", "127.0.0.1:0", "RLPx listen address (port 0 = any; empty = do not listen)")
	flag.StringVar(&s.nodeKey, "nodekey", "", "node key, 64 hex chars (default: a fresh key)")
	flag.Var(&s.dial, "dial", "enode URL to keep connected (static peer); repeatable")
	flag.Var(&s.do, "do", "a command (see the source header); repeatable; none = read commands from stdin")
	flag.StringVar(&topic, "topic", "0x67e71001", "topic of posted envelopes and of the filter (4 bytes hex)")
	flag.UintVar(&s.ttl, "ttl", 120, "TTL of posted envelopes, seconds")
	flag.Float64Var(&s.pow, "pow", whisper.DefaultMinimumPoW, "PoW target of posted envelopes")
	flag.UintVar(&s.workTime, "work-time", 10, "seconds allowed to seal one envelope or request")
	flag.Float64Var(&s.minPow, "min-pow", whisper.DefaultMinimumPoW, "this node's PoW requirement (geth default 0.2)")
	flag.StringVar(&s.password, "password", "mailmesh-interop", "password of the symmetric key of posts and the filter")
	flag.StringVar(&s.symKey, "sym-key", "", "raw symmetric key (64 hex chars) instead of -password")
	flag.StringVar(&s.payload, "payload", "geth-interop", "payload prefix of posted messages (\" #<n>\" is appended)")
	flag.StringVar(&s.msPassword, "mailserver-password", "status-offline-inbox", "mailserver password (requests we send; our mailserver)")
	flag.Float64Var(&s.requestPow, "request-pow", whisper.DefaultMinimumPoW, "PoW target of history requests (cmd/wnode -mspow)")
	flag.StringVar(&s.msDir, "mailserver", "", "run geth's whisper/mailserver with its LevelDB in this directory")
	flag.Float64Var(&s.msPow, "mailserver-pow", 0, "PoW a request to our mailserver needs")
	flag.StringVar(&s.bloom, "bloom", "full", "bloom we advertise: full, topic (our topic only) or none (all zeros)")
	flag.StringVar(&s.name, "name", "", "devp2p client name (default geth's Geth/v1.9.20-…)")
	flag.IntVar(&s.verbosity, "verbosity", 2, "geth log level on stderr (0 silent … 5 trace)")
	flag.Parse()
	raw, err := hex.DecodeString(strings.TrimPrefix(topic, "0x"))
	if err != nil || len(raw) != whisper.TopicLength {
		return nil, fmt.Errorf("-topic: want 4 bytes of hex, got %q", topic)
	}
	s.topic = whisper.BytesToTopic(raw)
	if s.bloom != "full" && s.bloom != "topic" && s.bloom != "none" {
		return nil, fmt.Errorf("-bloom: want full, topic or none, got %q", s.bloom)
	}
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

type gethPeer struct {
	s      *settings
	srv    *p2p.Server
	shh    *whisper.Whisper
	ms     *mailserver.WMailServer
	key    *ecdsa.PrivateKey
	symKey []byte
	msKey  []byte
	filter *whisper.Filter
	tap    *tap
	quitFn chan struct{}

	mu        sync.Mutex
	changed   *sync.Cond
	ready     []*p2p.Peer         // peers whose shh/6 handshake finished, in order
	posted    map[string]bool     // hashes we posted
	delivered map[string]bool     // distinct hashes the filter delivered (not ours)
	p2pSeen   map[string]bool     // distinct hashes seen in 0x7f
	completes int                 // 0x7d packets seen
	dropped   map[enode.ID]string // peers gone, with the reason
	sessions  map[enode.ID]bool   // peers with a running shh session
}

func start(s *settings) (*gethPeer, error) {
	g := &gethPeer{
		s: s, posted: map[string]bool{}, delivered: map[string]bool{}, p2pSeen: map[string]bool{},
		dropped: map[enode.ID]string{}, sessions: map[enode.ID]bool{}, quitFn: make(chan struct{}),
	}
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

	cfg := whisper.DefaultConfig
	cfg.MinimumAcceptedPOW = s.minPow
	g.shh = whisper.StandaloneWhisperService(&cfg)
	if s.symKey != "" {
		id, err := g.shh.AddSymKeyDirect(common.FromHex(s.symKey))
		if err != nil {
			return nil, fmt.Errorf("-sym-key: %v", err)
		}
		g.symKey, _ = g.shh.GetSymKey(id)
	} else {
		id, err := g.shh.AddSymKeyFromPassword(s.password)
		if err != nil {
			return nil, fmt.Errorf("-password: %v", err)
		}
		g.symKey, _ = g.shh.GetSymKey(id)
	}
	msID, err := g.shh.AddSymKeyFromPassword(s.msPassword)
	if err != nil {
		return nil, fmt.Errorf("-mailserver-password: %v", err)
	}
	g.msKey, _ = g.shh.GetSymKey(msID)
	if s.msDir != "" {
		g.ms = &mailserver.WMailServer{}
		if err := g.ms.Init(g.shh, s.msDir, s.msPassword, s.msPow); err != nil {
			return nil, fmt.Errorf("mailserver: %v", err)
		}
		g.shh.RegisterServer(g.ms)
	}
	// The filter geth's client path delivers to: our topic, our key, direct (0x7f) messages allowed.
	g.filter = &whisper.Filter{KeySym: g.symKey, Topics: [][]byte{s.topic[:]}, AllowP2P: true,
		Messages: map[common.Hash]*whisper.ReceivedMessage{}}
	if _, err := g.shh.Subscribe(g.filter); err != nil {
		return nil, fmt.Errorf("filter: %v", err)
	}
	switch s.bloom {
	case "none":
		err = g.shh.SetBloomFilter(make([]byte, whisper.BloomFilterSize))
	case "topic":
		err = g.shh.SetBloomFilter(whisper.TopicToBloom(s.topic))
	}
	if err != nil {
		return nil, fmt.Errorf("bloom: %v", err)
	}
	if err := g.shh.Start(); err != nil {
		return nil, err
	}

	g.tap = &tap{g: g}
	protocols := g.shh.Protocols()
	for i := range protocols {
		run := protocols[i].Run
		protocols[i].Run = func(peer *p2p.Peer, rw p2p.MsgReadWriter) error {
			return run(peer, g.tap.wrap(peer, rw))
		}
	}
	name := s.name
	if name == "" {
		name = fmt.Sprintf("Geth/v%s/%s-%s/%s", params.VersionWithMeta, runtime.GOOS, runtime.GOARCH, runtime.Version())
	}
	g.srv = &p2p.Server{Config: p2p.Config{
		PrivateKey: g.key, MaxPeers: 10, NoDiscovery: true, Name: name, ListenAddr: s.listen,
		Protocols: protocols, Logger: log.Root(),
	}}
	events := make(chan *p2p.PeerEvent, 64)
	sub := g.srv.SubscribeEvents(events)
	if err := g.srv.Start(); err != nil {
		return nil, fmt.Errorf("p2p server: %v", err)
	}
	go g.watchPeers(events, sub.Err())
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
		"pubkey": hex.EncodeToString(crypto.FromECDSAPub(&g.key.PublicKey)[1:]),
		"listen": g.srv.ListenAddr, "geth": params.VersionWithMeta, "go": runtime.Version(),
		"client": name, "min_pow": s.minPow, "bloom": s.bloom, "mailserver": s.msDir != "",
		"topic":      "0x" + hex.EncodeToString(s.topic[:]),
		"sym_key_id": hex.EncodeToString(crypto.Keccak256(g.symKey)),
	})
	return g, nil
}

func (g *gethPeer) stop() {
	close(g.quitFn)
	g.srv.Stop()
	// Whisper.Stop waits for the goroutine SetBloomFilter/SetMinimumPoW start to switch the tolerated value
	// after syncAllowance (10 s), which ignores the quit channel: bound the wait, we are exiting anyway.
	stopped := make(chan struct{})
	go func() { g.shh.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(time.Second):
	}
	if g.ms != nil {
		g.ms.Close()
	}
}

func (g *gethPeer) watchPeers(events chan *p2p.PeerEvent, errc <-chan error) {
	for {
		select {
		case ev := <-events:
			switch ev.Type {
			case p2p.PeerEventTypeAdd:
				stdout.emit("peer-added", map[string]interface{}{"id": ev.Peer.String(), "remote": ev.RemoteAddress})
			case p2p.PeerEventTypeDrop:
				g.mu.Lock()
				g.dropped[ev.Peer] = ev.Error
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

// pollFilter drains geth's filter (its API is polling: Filter.Retrieve, as shh_getFilterMessages).
func (g *gethPeer) pollFilter() {
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
				"hash": h, "own": own, "payload": string(m.Payload), "src": src, "sent": m.Sent, "ttl": m.TTL,
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

func (g *gethPeer) run(do []string) int {
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

func argInt(fields []string, i int) (int, error) {
	if len(fields) <= i {
		return 0, fmt.Errorf("%s: missing argument %d", fields[0], i)
	}
	v, err := strconv.Atoi(fields[i])
	if err != nil {
		return 0, fmt.Errorf("%s: argument %d: %v", fields[0], i, err)
	}
	return v, nil
}

func argSeconds(fields []string, i int) (time.Duration, error) {
	if len(fields) <= i {
		return 0, fmt.Errorf("%s: missing timeout (seconds)", fields[0])
	}
	v, err := strconv.ParseFloat(fields[i], 64)
	if err != nil {
		return 0, fmt.Errorf("%s: timeout: %v", fields[0], err)
	}
	return time.Duration(v * float64(time.Second)), nil
}

func (g *gethPeer) command(f []string) (map[string]interface{}, error) {
	switch f[0] {
	case "wait-peer":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, "a ready shh/6 peer", func() bool { return len(g.ready) > 0 }); err != nil {
			return nil, err
		}
		p := g.lastReady()
		return map[string]interface{}{"id": p.ID().String()}, nil
	case "post":
		n, err := argInt(f, 1)
		if err != nil {
			return nil, err
		}
		return g.post(n)
	case "request":
		lower, err := argInt(f, 1)
		if err != nil {
			return nil, err
		}
		upper, err := argInt(f, 2)
		if err != nil {
			return nil, err
		}
		topic := "full"
		if len(f) > 3 {
			topic = f[3]
		}
		return g.request(uint32(lower), uint32(upper), topic)
	case "wait-messages", "wait-p2p":
		n, err := argInt(f, 1)
		if err != nil {
			return nil, err
		}
		d, err := argSeconds(f, 2)
		if err != nil {
			return nil, err
		}
		set := &g.delivered
		if f[0] == "wait-p2p" {
			set = &g.p2pSeen
		}
		if err := g.waitFor(d, fmt.Sprintf("%d envelopes (%s)", n, f[0]), func() bool { return len(*set) >= n }); err != nil {
			return nil, err
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		return map[string]interface{}{"count": len(*set)}, nil
	case "wait-complete":
		d, err := argSeconds(f, 1)
		if err != nil {
			return nil, err
		}
		if err := g.waitFor(d, "a 0x7d", func() bool { return g.completes > 0 }); err != nil {
			return nil, err
		}
		return nil, nil
	}
	return nil, fmt.Errorf("unknown command %q", f[0])
}

// waitFor blocks until cond (evaluated under g.mu) holds, or fails after d.
func (g *gethPeer) waitFor(d time.Duration, what string, cond func() bool) error {
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

func (g *gethPeer) lastReady() *p2p.Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := len(g.ready) - 1; i >= 0; i-- {
		if g.sessions[g.ready[i].ID()] {
			return g.ready[i]
		}
	}
	return nil
}

func (g *gethPeer) post(n int) (map[string]interface{}, error) {
	hashes := make([]string, 0, n)
	for i := 0; i < n; i++ {
		params := whisper.MessageParams{
			TTL: uint32(g.s.ttl), Src: g.key, KeySym: g.symKey, Topic: g.s.topic, PoW: g.s.pow,
			WorkTime: uint32(g.s.workTime), Payload: []byte(fmt.Sprintf("%s #%d", g.s.payload, i)),
		}
		msg, err := whisper.NewSentMessage(&params)
		if err != nil {
			return nil, err
		}
		env, err := msg.Wrap(&params)
		if err != nil {
			return nil, err
		}
		raw, err := rlpEncode(env)
		if err != nil {
			return nil, err
		}
		h := hex.EncodeToString(env.Hash().Bytes())
		g.mu.Lock()
		g.posted[h] = true
		g.mu.Unlock()
		if err := g.shh.Send(env); err != nil {
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

// request sends a history request the way cmd/wnode's requestExpiredMessagesLoop does (v1.9.20): payload
// Lower(4 BE) ‖ Upper(4 BE) ‖ Bloom(64), symmetric-encrypted with the mailserver password's key, signed with
// the node key, sealed to -request-pow, sent with Whisper.RequestHistoricMessages (which trusts the peer).
// wnode also ORs 16 random bits into a topic's bloom (obfuscateBloom); we do not, to stay deterministic.
func (g *gethPeer) request(lower, upper uint32, topic string) (map[string]interface{}, error) {
	p := g.lastReady()
	if p == nil {
		return nil, fmt.Errorf("request: no ready peer")
	}
	var bloom []byte
	if topic == "full" {
		bloom = whisper.MakeFullNodeBloom()
	} else {
		raw, err := hex.DecodeString(strings.TrimPrefix(topic, "0x"))
		if err != nil || len(raw) != whisper.TopicLength {
			return nil, fmt.Errorf("request: bad topic %q", topic)
		}
		bloom = whisper.TopicToBloom(whisper.BytesToTopic(raw))
	}
	if upper == 0 {
		upper = 0xFFFFFFFF // as cmd/wnode: "0" means no upper limit
	}
	data := make([]byte, 8, 8+whisper.BloomFilterSize)
	putUint32(data, lower)
	putUint32(data[4:], upper)
	data = append(data, bloom...)
	params := whisper.MessageParams{PoW: g.s.requestPow, Payload: data, KeySym: g.msKey, Src: g.key, WorkTime: 5}
	msg, err := whisper.NewSentMessage(&params)
	if err != nil {
		return nil, err
	}
	env, err := msg.Wrap(&params)
	if err != nil {
		return nil, err
	}
	id := p.ID()
	if err := g.shh.RequestHistoricMessages(id[:], env); err != nil {
		return nil, fmt.Errorf("RequestHistoricMessages: %v", err)
	}
	return map[string]interface{}{"hash": hex.EncodeToString(env.Hash().Bytes()), "peer": id.String(),
		"lower": lower, "upper": upper, "bloom": hex.EncodeToString(bloom), "pow": env.PoW()}, nil
}

func putUint32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
}

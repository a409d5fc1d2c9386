// statuspeer060: a real status-go v0.60.0 Waku node, driven by a small script, for Mailmesh's interop tests
// (docs/interop.md). status-go v0.60.0 registers waku/0 and waku/1 (waku/waku.go `New`), so against a peer
// that offers waku/1 devp2p runs waku/1 (status-go `waku/v1`: integer status-option keys, the Status payload
// is the bare option list).
//
// Everything on the wire is status-go's code: its go-ethereum fork's RLPx, `waku` (sealing, filters, topic
// interest or bloom, status updates, confirmations), the mailserver client forms (the envelope-wrapped request
// as services/wakuext RequestMessages builds it, symmetric or to the mailserver's public key, and the plain
// MessagesRequest as protocol/transport/waku SendMessagesRequest builds it), status-go's parse of a 0x7d
// (EventMailServerRequestCompleted), and optionally its mailserver (mailserver.WakuMailServer, LevelDB).
// Output: JSON lines on stdout (key "event"), as tools/interop/statuspeer (v0.50.0) prints them.
//
// Commands (from -do flags, else stdin; exit 0 at the end / EOF / "quit", 1 when a command fails):
//
//	wait-peer TIMEOUT_S
//	post COUNT                                      seal and Send COUNT envelopes (-topic, -ttl, -pow, -password)
//	request LOWER UPPER TOPIC|full LIMIT [CURSOR]   envelope-wrapped, symmetric (wakuext RequestMessages, SymKeyID)
//	request-asym LOWER UPPER TOPIC LIMIT [CURSOR]   envelope-wrapped, to the peer's node key (no SymKeyID)
//	request-plain LOWER UPPER TOPIC LIMIT [CURSOR]  MessagesRequest, bloom only (protocol/transport/waku)
//	request-topics LOWER UPPER TOPIC LIMIT [CURSOR] MessagesRequest with Topics and no bloom
//	wait-complete TIMEOUT_S                         until status-go reports the last request completed
//	wait-messages N TIMEOUT_S                       until the filters delivered N distinct envelopes not ours
//	subscribe TOPIC                                 one more filter (topic-interest mode: a Status Update, key 5)
//	set-bloom TOPIC…                                Waku.SetBloomFilter of those topics (Status Update, key 1)
//	set-pow POW                                     Waku.SetMinimumPoW (Status Update, key 0)
//	light-update true|false                         a Status Update with key 2 only, v1.StatusOptions' encoding
//	decode-options HEX                              status-go's waku/1 option decoder applied to HEX (no network)
//	quit
package main

import (
	"crypto/ecdsa"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/log"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/p2p/enode"
	"github.com/status-im/status-go/mailserver"
	"github.com/status-im/status-go/params"
	"github.com/status-im/status-go/waku"
	"github.com/status-im/status-go/waku/common"
)

// StatusGoVersion is the status-go module version this program is built against (go.mod).
const StatusGoVersion = "v0.60.0"

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
	topic                                                       common.TopicType
	ttl, workTime                                               uint
	pow, minPow                                                 float64
	confirmations, bloomMode, light                             bool
	verbosity                                                   int
}

func parseTopic(text string) (common.TopicType, error) {
	raw, err := hex.DecodeString(strings.TrimPrefix(text, "0x"))
	if err != nil || len(raw) != common.TopicLength {
		return common.TopicType{}, fmt.Errorf("want a topic of 4 bytes of hex, got %q", text)
	}
	return common.BytesToTopic(raw), nil
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
	flag.Float64Var(&s.pow, "pow", common.DefaultMinimumPoW, "PoW target of posted envelopes")
	flag.UintVar(&s.workTime, "work-time", 10, "seconds allowed to seal one envelope")
	flag.Float64Var(&s.minPow, "min-pow", common.DefaultMinimumPoW, "this node's PoW requirement (status-go default 0.2)")
	flag.StringVar(&s.password, "password", "mailmesh-interop", "password of the symmetric key of posts and the filter")
	flag.StringVar(&s.payload, "payload", "status-go interop", "payload prefix of posted messages (\" #<n>\" is appended)")
	flag.StringVar(&s.msPassword, "mailserver-password", "status-offline-inbox", "mailserver password (our requests; our mailserver)")
	flag.StringVar(&s.msDir, "mailserver", "", "run status-go's mailserver with its LevelDB in this directory")
	flag.BoolVar(&s.confirmations, "confirmations", false, "EnableConfirmations: answer Messages with Message Response + Batch Ack")
	flag.BoolVar(&s.bloomMode, "bloom-mode", false, "BloomFilterMode: advertise a bloom filter instead of topic interest")
	flag.BoolVar(&s.light, "light", false, "LightClient: advertise a light node (received envelopes are not forwarded)")
	flag.StringVar(&s.name, "name", "", "devp2p client name")
	flag.IntVar(&s.verbosity, "verbosity", 2, "go-ethereum log level on stderr (0 silent … 5 trace)")
	flag.Parse()
	t, err := parseTopic(topic)
	if err != nil {
		return nil, fmt.Errorf("-topic: %v", err)
	}
	s.topic = t
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
	store  *notifyingStore
	quitFn chan struct{}

	mu          sync.Mutex
	changed     *sync.Cond
	ready       []*p2p.Peer
	sessions    map[enode.ID]*tappedRW
	posted      map[string]bool
	delivered   map[string]bool
	completed   map[string]completion // by request ID (hex), status-go's EventMailServerRequestCompleted
	lastRequest string
	page        []string // 0x7f envelope hashes received since the last request was sent
}

func start(s *settings) (*statusPeer, error) {
	g := &statusPeer{s: s, sessions: map[enode.ID]*tappedRW{}, posted: map[string]bool{}, delivered: map[string]bool{},
		completed: map[string]completion{}, quitFn: make(chan struct{})}
	g.changed = sync.NewCond(&g.mu)
	g.store = &notifyingStore{g: g, seen: map[string]bool{}}
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
	cfg.BloomFilterMode = s.bloomMode
	cfg.LightClient = s.light
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
	if err := g.subscribe(s.topic); err != nil {
		return nil, err
	}
	events := make(chan common.EnvelopeEvent, 256)
	g.w.SubscribeEnvelopeEvents(events)
	go g.watchEnvelopeEvents(events)

	protocols := g.w.Protocols()
	for i := range protocols {
		run, version := protocols[i].Run, protocols[i].Version
		protocols[i].Run = func(peer *p2p.Peer, rw p2p.MsgReadWriter) error {
			return run(peer, g.wrap(peer, rw, version))
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
		"bloom_mode": s.bloomMode, "light": s.light, "confirmations": s.confirmations,
		// The Message Response error codes (waku/common/const.go: iota inside a long const block).
		"envelope_error_codes": map[string]uint{"time_not_synced": common.EnvelopeTimeNotSynced,
			"other": common.EnvelopeOtherError},
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

// subscribe installs a filter for one topic with the channel key. In topic-interest mode (status-go's
// default) Waku.Subscribe announces the new interest to every peer (Status Update, key 5); in bloom mode it
// widens the bloom when needed (key 1). All filters share one notifying store.
func (g *statusPeer) subscribe(topic common.TopicType) error {
	f := &common.Filter{KeySym: g.symKey, Topics: [][]byte{append([]byte{}, topic[:]...)}, AllowP2P: true,
		Messages: g.store}
	if _, err := g.w.Subscribe(f); err != nil {
		return fmt.Errorf("filter: %v", err)
	}
	return nil
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

// watchEnvelopeEvents reports status-go's own view: its parse of our 0x7d (request completed, with the last
// envelope hash, cursor or error) and of our confirmations (batch acknowledged, with the batch hash and, from
// a Message Response, the per-envelope errors).
func (g *statusPeer) watchEnvelopeEvents(events chan common.EnvelopeEvent) {
	for {
		select {
		case <-g.quitFn:
			return
		case ev := <-events:
			fields := map[string]interface{}{"type": string(ev.Event), "hash": hex.EncodeToString(ev.Hash[:]),
				"peer": ev.Peer.String(), "batch": hex.EncodeToString(ev.Batch[:])}
			switch ev.Event {
			case common.EventMailServerRequestCompleted:
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
			case common.EventBatchAcknowledged:
				// Data is the Message Response's error list (0x0c); nil for a Batch Ack (0x0b).
				if errs, ok := ev.Data.([]common.EnvelopeError); ok {
					list := []map[string]interface{}{}
					for _, e := range errs {
						list = append(list, map[string]interface{}{"hash": hex.EncodeToString(e.Hash[:]),
							"code": e.Code, "description": e.Description})
					}
					fields["errors"] = list
				}
			}
			stdout.emit("envelope-event", fields)
		}
	}
}

// notifyingStore is the filters' MessageStore: status-go hands it every message a filter opened
// (Filter.Trigger); it reports and counts them at once, so nothing polls the filters.
type notifyingStore struct {
	g    *statusPeer
	mu   sync.Mutex
	seen map[string]bool
}

func (st *notifyingStore) Add(m *common.ReceivedMessage) error {
	h := hex.EncodeToString(m.EnvelopeHash[:])
	st.mu.Lock()
	dup := st.seen[h]
	st.seen[h] = true
	st.mu.Unlock()
	if dup {
		return nil
	}
	g := st.g
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
	return nil
}

// Pop is never needed: Add reported every message already.
func (st *notifyingStore) Pop() ([]*common.ReceivedMessage, error) { return nil, nil }

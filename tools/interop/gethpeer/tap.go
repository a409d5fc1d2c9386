package main

// The wire tap: every shh/6 packet geth reads or writes passes through here unchanged and is reported as a
// JSON line, so the tests can check bit-exact envelopes, the packet forms (0x7f single or list, 0x7d) and
// the Status options both ways — things geth's API does not expose.

import (
	"bytes"
	"encoding/hex"
	"io/ioutil"
	"math"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/rlp"
	whisper "github.com/ethereum/go-ethereum/whisper/whisperv6"
)

const (
	statusCode         = 0
	messagesCode       = 1
	powRequirementCode = 2
	bloomFilterExCode  = 3
	p2pCompleteCode    = 125 // status-go's; geth v1.9.20 ignores it
	p2pRequestCode     = 126
	p2pMessageCode     = 127
)

type tap struct{ g *gethPeer }

type tappedRW struct {
	rw    p2p.MsgReadWriter
	peer  *p2p.Peer
	g     *gethPeer
	reads int
}

func rlpEncode(v interface{}) ([]byte, error) { return rlp.EncodeToBytes(v) }

func (t *tap) wrap(peer *p2p.Peer, rw p2p.MsgReadWriter) p2p.MsgReadWriter {
	caps := []string{}
	for _, c := range peer.Caps() {
		caps = append(caps, c.String())
	}
	stdout.emit("session", map[string]interface{}{
		"id": peer.ID().String(), "name": peer.Name(), "inbound": peer.Inbound(), "caps": caps,
		"remote": peer.RemoteAddr().String(), "pubkey": hex.EncodeToString(crypto.FromECDSAPub(peer.Node().Pubkey())[1:]),
	})
	return &tappedRW{rw: rw, peer: peer, g: t.g}
}

func (r *tappedRW) ReadMsg() (p2p.Msg, error) {
	r.reads++
	if r.reads == 2 {
		// whisperv6.Peer.handshake read the remote Status with the first call and returned without error:
		// this second call comes from runMessageLoop, so the session is established.
		g := r.g
		g.mu.Lock()
		g.ready = append(g.ready, r.peer)
		g.sessions[r.peer.ID()] = true
		g.changed.Broadcast()
		g.mu.Unlock()
		stdout.emit("peer-ready", map[string]interface{}{"id": r.peer.ID().String(), "inbound": r.peer.Inbound()})
	}
	msg, err := r.rw.ReadMsg()
	if err != nil {
		return msg, err
	}
	payload, err := ioutil.ReadAll(msg.Payload)
	if err != nil {
		return msg, err
	}
	msg.Payload = bytes.NewReader(payload)
	r.observe("in", msg.Code, payload)
	return msg, nil
}

func (r *tappedRW) WriteMsg(msg p2p.Msg) error {
	payload, err := ioutil.ReadAll(msg.Payload)
	if err != nil {
		return err
	}
	msg.Payload = bytes.NewReader(payload)
	r.observe("out", msg.Code, payload)
	return r.rw.WriteMsg(msg)
}

func bloomText(b []byte) string {
	if len(b) == whisper.BloomFilterSize && bytes.Equal(b, whisper.MakeFullNodeBloom()) {
		return "full"
	}
	return hex.EncodeToString(b)
}

func (r *tappedRW) emitEnvelope(dir, form string, raw []byte) string {
	h := hex.EncodeToString(crypto.Keccak256(raw))
	stdout.emit("envelope", map[string]interface{}{
		"dir": dir, "code": form, "hash": h, "raw": hex.EncodeToString(raw), "peer": r.peer.ID().String(),
	})
	return h
}

func (r *tappedRW) observe(dir string, code uint64, payload []byte) {
	peer := r.peer.ID().String()
	switch code {
	case statusCode:
		// [version, pow (float64 bits), bloom, light, …] — only the version is mandatory.
		fields := map[string]interface{}{"dir": dir, "peer": peer, "raw": hex.EncodeToString(payload)}
		if content, _, err := rlp.SplitList(payload); err == nil {
			n, _ := rlp.CountValues(content)
			fields["items"] = n
			var version, powBits uint64
			rest := content
			if _, c, rest2, err := rlp.Split(rest); err == nil {
				version = bytesToUint(c)
				rest = rest2
				if _, c2, rest3, err := rlp.Split(rest); err == nil {
					powBits = bytesToUint(c2)
					fields["pow"] = math.Float64frombits(powBits)
					rest = rest3
					if _, c3, rest4, err := rlp.Split(rest); err == nil {
						fields["bloom"] = bloomText(c3)
						if _, c4, _, err := rlp.Split(rest4); err == nil {
							fields["light"] = len(c4) == 1 && c4[0] == 1
						}
					}
				}
			}
			fields["version"] = version
		}
		stdout.emit("status", fields)
	case messagesCode:
		content, _, err := rlp.SplitList(payload)
		if err != nil {
			stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "error": err.Error()})
			return
		}
		for len(content) > 0 {
			_, _, rest, err := rlp.Split(content)
			if err != nil {
				break
			}
			r.emitEnvelope(dir, "messages", content[:len(content)-len(rest)])
			content = rest
		}
	case powRequirementCode:
		var bits uint64
		_ = rlp.DecodeBytes(payload, &bits)
		stdout.emit("pow-requirement", map[string]interface{}{"dir": dir, "peer": peer, "pow": math.Float64frombits(bits)})
	case bloomFilterExCode:
		var bloom []byte
		_ = rlp.DecodeBytes(payload, &bloom)
		stdout.emit("bloom-exchange", map[string]interface{}{"dir": dir, "peer": peer, "bloom": bloomText(bloom)})
	case p2pCompleteCode:
		// Printed before it counts (as every event below), so a wait-… "done" line comes after it.
		stdout.emit("p2p-complete", map[string]interface{}{"dir": dir, "peer": peer, "payload": hex.EncodeToString(payload)})
		if dir == "in" {
			r.g.mu.Lock()
			r.g.completes++
			r.g.changed.Broadcast()
			r.g.mu.Unlock()
		}
	case p2pRequestCode:
		r.emitEnvelope(dir, "p2p-request", payload)
	case p2pMessageCode:
		// geth decodes a single envelope here; a list (Waku's form) would make it drop the peer.
		content, _, err := rlp.SplitList(payload)
		form := "p2p"
		if err == nil && len(content) > 0 {
			if kind, _, _, err := rlp.Split(content); err == nil && kind == rlp.List {
				form = "p2p-list"
			}
		}
		h := r.emitEnvelope(dir, form, payload)
		if dir == "in" && form == "p2p" {
			r.g.mu.Lock()
			r.g.p2pSeen[h] = true
			r.g.changed.Broadcast()
			r.g.mu.Unlock()
		}
	default:
		stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "size": len(payload)})
	}
}

func bytesToUint(b []byte) uint64 {
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v
}

package main

// The wire tap (as in tools/interop/gethpeer): every waku/0 packet status-go reads or writes passes through
// unchanged and is reported as a JSON line.

import (
	"bytes"
	"encoding/hex"
	"io/ioutil"

	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/rlp"
)

var codeNames = map[uint64]string{
	0: "status", 1: "messages", 11: "batch-ack", 12: "message-response", 22: "status-update",
	125: "p2p-complete", 126: "p2p-request", 127: "p2p",
}

type tappedRW struct {
	rw    p2p.MsgReadWriter
	peer  *p2p.Peer
	g     *statusPeer
	reads int
}

func (g *statusPeer) wrap(peer *p2p.Peer, rw p2p.MsgReadWriter) p2p.MsgReadWriter {
	caps := []string{}
	for _, c := range peer.Caps() {
		caps = append(caps, c.String())
	}
	stdout.emit("session", map[string]interface{}{
		"id": peer.ID().String(), "name": peer.Name(), "inbound": peer.Inbound(), "caps": caps,
		"remote": peer.RemoteAddr().String(), "pubkey": hex.EncodeToString(crypto.FromECDSAPub(peer.Node().Pubkey())[1:]),
	})
	return &tappedRW{rw: rw, peer: peer, g: g}
}

func (r *tappedRW) ReadMsg() (p2p.Msg, error) {
	r.reads++
	if r.reads == 2 { // the handshake read the remote Status and succeeded: the message loop reads now
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

func (r *tappedRW) envelope(dir, code string, raw []byte) string {
	h := hex.EncodeToString(crypto.Keccak256(raw))
	stdout.emit("envelope", map[string]interface{}{"dir": dir, "code": code, "hash": h,
		"raw": hex.EncodeToString(raw), "peer": r.peer.ID().String()})
	return h
}

// items splits an RLP list payload into its raw items.
func items(payload []byte) ([][]byte, error) {
	content, _, err := rlp.SplitList(payload)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for len(content) > 0 {
		_, _, rest, err := rlp.Split(content)
		if err != nil {
			return nil, err
		}
		out = append(out, content[:len(content)-len(rest)])
		content = rest
	}
	return out, nil
}

func (r *tappedRW) observe(dir string, code uint64, payload []byte) {
	peer := r.peer.ID().String()
	name, known := codeNames[code]
	if !known {
		stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "size": len(payload)})
		return
	}
	switch code {
	case 0, 22:
		// waku/0 Status: [version, [[key, value], …]]; Status Update: [[key, value], …]. Keys as hex bytes.
		fields := map[string]interface{}{"dir": dir, "peer": peer, "raw": hex.EncodeToString(payload), "code": name}
		list, err := items(payload)
		if err == nil && code == 0 && len(list) == 2 {
			var version uint64
			_ = rlp.DecodeBytes(list[0], &version)
			fields["version"] = version
			list, err = items(list[1])
		}
		if err == nil {
			opts := map[string]string{}
			for _, pair := range list {
				kv, err := items(pair)
				if err != nil || len(kv) != 2 {
					continue
				}
				_, key, _, _ := rlp.Split(kv[0])
				opts[hex.EncodeToString(key)] = hex.EncodeToString(kv[1])
			}
			fields["options"] = opts
		}
		stdout.emit("status", fields)
	case 1, 127:
		list, err := items(payload)
		if err != nil {
			stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "error": err.Error()})
			return
		}
		for _, raw := range list {
			h := r.envelope(dir, name, raw)
			if code == 127 && dir == "in" {
				r.g.mu.Lock()
				r.g.page = append(r.g.page, h)
				r.g.mu.Unlock()
			}
		}
	case 126:
		stdout.emit("p2p-request", map[string]interface{}{"dir": dir, "peer": peer, "raw": hex.EncodeToString(payload)})
	default:
		stdout.emit(name, map[string]interface{}{"dir": dir, "peer": peer, "payload": hex.EncodeToString(payload)})
	}
}

package main

// The wire tap (as in tools/interop/statuspeer): every waku packet status-go reads or writes passes through
// unchanged and is reported as a JSON line, decoded by the session's protocol version (waku/v1 and waku/v0 use
// the same codes; they differ in the Status form and the option keys). Packets read are reported before
// status-go handles them, packets written once written.

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io/ioutil"

	gethcommon "github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/rlp"
	v1 "github.com/status-im/status-go/waku/v1"
)

// The waku message codes (waku/v1/const.go; the same in waku/v0).
const (
	statusCode             = 0
	messagesCode           = 1
	batchAcknowledgedCode  = 11
	messageResponseCode    = 12
	statusUpdateCode       = 22
	p2pRequestCompleteCode = 125
	p2pRequestCode         = 126
	p2pMessageCode         = 127
)

var codeNames = map[uint64]string{
	statusCode: "status", messagesCode: "messages", batchAcknowledgedCode: "batch-ack",
	messageResponseCode: "message-response", statusUpdateCode: "status-update",
	p2pRequestCompleteCode: "p2p-complete", p2pRequestCode: "p2p-request", p2pMessageCode: "p2p",
}

type tappedRW struct {
	rw      p2p.MsgReadWriter
	peer    *p2p.Peer
	g       *statusPeer
	version uint
	reads   int
}

func (g *statusPeer) wrap(peer *p2p.Peer, rw p2p.MsgReadWriter, version uint) p2p.MsgReadWriter {
	caps := []string{}
	for _, c := range peer.Caps() {
		caps = append(caps, c.String())
	}
	stdout.emit("session", map[string]interface{}{
		"id": peer.ID().String(), "name": peer.Name(), "inbound": peer.Inbound(), "caps": caps,
		"protocol": fmt.Sprintf("waku/%d", version), "remote": peer.RemoteAddr().String(),
		"pubkey": hex.EncodeToString(crypto.FromECDSAPub(peer.Node().Pubkey())[1:]),
	})
	return &tappedRW{rw: rw, peer: peer, g: g, version: version}
}

func (r *tappedRW) ReadMsg() (p2p.Msg, error) {
	r.reads++
	if r.reads == 2 { // the handshake read the remote Status and succeeded: the message loop reads now
		g := r.g
		g.mu.Lock()
		g.ready = append(g.ready, r.peer)
		g.sessions[r.peer.ID()] = r
		g.changed.Broadcast()
		g.mu.Unlock()
		stdout.emit("peer-ready", map[string]interface{}{"id": r.peer.ID().String(), "inbound": r.peer.Inbound(),
			"protocol": fmt.Sprintf("waku/%d", r.version)})
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

// WriteMsg reports a packet once it is written: p2p's WriteMsg returns after the frame went to the socket, so
// a driver that saw the line may act on it (e.g. disconnect) without cutting the packet off.
func (r *tappedRW) WriteMsg(msg p2p.Msg) error {
	payload, err := ioutil.ReadAll(msg.Payload)
	if err != nil {
		return err
	}
	msg.Payload = bytes.NewReader(payload)
	err = r.rw.WriteMsg(msg)
	if err != nil {
		stdout.emit("write-failed", map[string]interface{}{"code": msg.Code, "peer": r.peer.ID().String(),
			"error": err.Error()})
	}
	r.observe("out", msg.Code, payload)
	return err
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

// status reports a Status (code 0) or Status Update (22). waku/1: the payload is the option list, keys RLP
// integers; waku/0: Status is [0, options], keys the strings "0".."5". "options" maps the key, as a decimal
// string, to the value's raw RLP (hex); "keys" lists each key's raw RLP in wire order.
func (r *tappedRW) status(dir string, code uint64, payload []byte) map[string]interface{} {
	fields := map[string]interface{}{"dir": dir, "peer": r.peer.ID().String(), "raw": hex.EncodeToString(payload),
		"code": codeNames[code], "protocol": fmt.Sprintf("waku/%d", r.version)}
	list, err := items(payload)
	if err == nil && code == statusCode && r.version == 0 && len(list) == 2 {
		var version uint64
		_ = rlp.DecodeBytes(list[0], &version)
		fields["version"] = version
		list, err = items(list[1])
	}
	if err != nil {
		fields["error"] = err.Error()
		return fields
	}
	opts, keys := map[string]string{}, []string{}
	for _, pair := range list {
		kv, err := items(pair)
		if err != nil || len(kv) != 2 {
			continue
		}
		keys = append(keys, hex.EncodeToString(kv[0]))
		var key string
		if r.version == 0 {
			var s string
			_ = rlp.DecodeBytes(kv[0], &s)
			key = s
		} else {
			var n uint64
			if err := rlp.DecodeBytes(kv[0], &n); err != nil {
				key = "bad:" + hex.EncodeToString(kv[0])
			} else {
				key = fmt.Sprint(n)
			}
		}
		opts[key] = hex.EncodeToString(kv[1])
	}
	fields["options"], fields["keys"] = opts, keys
	return fields
}

func (r *tappedRW) observe(dir string, code uint64, payload []byte) {
	peer := r.peer.ID().String()
	name, known := codeNames[code]
	if !known {
		stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "size": len(payload)})
		return
	}
	switch code {
	case statusCode, statusUpdateCode:
		stdout.emit("status", r.status(dir, code, payload))
	case messagesCode, p2pMessageCode:
		list, err := items(payload)
		if err != nil {
			stdout.emit("packet", map[string]interface{}{"dir": dir, "code": code, "peer": peer, "error": err.Error()})
			return
		}
		hashes := []string{}
		for _, raw := range list {
			h := hex.EncodeToString(crypto.Keccak256(raw))
			hashes = append(hashes, h)
			stdout.emit("envelope", map[string]interface{}{"dir": dir, "code": name, "hash": h,
				"raw": hex.EncodeToString(raw), "peer": peer})
			if code == p2pMessageCode && dir == "in" {
				r.g.mu.Lock()
				r.g.page = append(r.g.page, h)
				r.g.mu.Unlock()
			}
		}
		if code == messagesCode { // the batch hash confirmations name: keccak256 of the packet payload
			stdout.emit("batch", map[string]interface{}{"dir": dir, "peer": peer,
				"hash": hex.EncodeToString(crypto.Keccak256(payload)), "envelopes": hashes})
		}
	case batchAcknowledgedCode:
		var h gethcommon.Hash
		fields := map[string]interface{}{"dir": dir, "peer": peer, "payload": hex.EncodeToString(payload)}
		if err := rlp.DecodeBytes(payload, &h); err != nil {
			fields["error"] = err.Error()
		} else {
			fields["batch"] = hex.EncodeToString(h[:])
		}
		stdout.emit(name, fields)
	case messageResponseCode: // decoded as status-go's handleMessageResponseCode does
		fields := map[string]interface{}{"dir": dir, "peer": peer, "payload": hex.EncodeToString(payload)}
		var resp v1.MultiVersionResponse
		if err := rlp.DecodeBytes(payload, &resp); err != nil {
			fields["error"] = err.Error()
		} else if decoded, err := resp.DecodeResponse1(); err != nil {
			fields["version"], fields["error"] = resp.Version, err.Error()
		} else {
			fields["version"], fields["batch"] = resp.Version, hex.EncodeToString(decoded.Hash[:])
			fields["errors"] = len(decoded.Errors)
		}
		stdout.emit(name, fields)
	case p2pRequestCode:
		stdout.emit("p2p-request", map[string]interface{}{"dir": dir, "peer": peer, "raw": hex.EncodeToString(payload)})
	default:
		stdout.emit(name, map[string]interface{}{"dir": dir, "peer": peer, "payload": hex.EncodeToString(payload)})
	}
}

package main

// The mailserver request forms status-go v0.60.0's clients send, each built as that version builds it:
//
//   - request / request-asym: services/wakuext RequestMessages → ext.MakeMessagesRequestPayload → makeEnvelop →
//     Waku.RequestHistoricMessagesWithTimeout: payload [Lower, Upper, Bloom, Topics(nil), Limit, Cursor,
//     Batch=true], symmetric with the mailserver password's key (SymKeyID set) or, without SymKeyID, encrypted
//     to the mailserver node's public key; signed with the node key, PoW = our MinPow, WorkTime 5 s, TTL
//     default (50 s). The request ID is the envelope hash.
//   - request-plain: protocol/transport/waku Transport.SendMessagesRequest → createMessagesRequest →
//     Waku.SendMessagesRequest: ID = the 32 ASCII hex characters of a random UUID, Bloom = the OR of the
//     filters' topic blooms and the zero topic's (Topics empty). The Messenger always asks Limit 100; here the
//     limit is an argument.
//   - request-topics: a MessagesRequest with Topics and no bloom, which common.MessagesRequest carries and
//     Validate accepts ("one must be non-empty"), as later status-go clients send it.

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"time"

	"github.com/ethereum/go-ethereum/rlp"
	"github.com/google/uuid"
	"github.com/status-im/status-go/mailserver"
	"github.com/status-im/status-go/waku/common"
)

// wakuextWorkTime is services/wakuext defaultWorkTime.
const wakuextWorkTime = 5

// request parses "KIND LOWER UPPER TOPIC|full LIMIT [CURSOR]" and sends that form.
func (g *statusPeer) request(f []string) (map[string]interface{}, error) {
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
	var topics []common.TopicType
	if f[3] != "full" {
		t, err := parseTopic(f[3])
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f[0], err)
		}
		topics = append(topics, t)
	}
	switch f[0] {
	case "request":
		return g.requestEnvelope(lower, upper, topics, limit, cursor, false)
	case "request-asym":
		return g.requestEnvelope(lower, upper, topics, limit, cursor, true)
	case "request-plain":
		return g.requestPlain(lower, upper, topics, limit, cursor, false)
	}
	return g.requestPlain(lower, upper, topics, limit, cursor, true)
}

// topicsToBloom is services/ext topicsToBloom (and protocol/transport/waku's copy); no topics = a full bloom.
func topicsToBloom(topics []common.TopicType) []byte {
	if len(topics) == 0 {
		return common.MakeFullNodeBloom()
	}
	i := new(big.Int)
	for _, t := range topics {
		i.Or(i, new(big.Int).SetBytes(t.ToBloom()))
	}
	combined := make([]byte, common.BloomFilterSize)
	data := i.Bytes()
	copy(combined[common.BloomFilterSize-len(data):], data)
	return combined
}

func (g *statusPeer) requestEnvelope(lower, upper uint32, topics []common.TopicType, limit uint32, cursor []byte,
	asym bool) (map[string]interface{}, error) {
	p := g.lastReady()
	if p == nil {
		return nil, fmt.Errorf("request: no ready peer")
	}
	payload, err := rlp.EncodeToBytes(mailserver.MessagesRequestPayload{
		Lower: lower, Upper: upper, Bloom: topicsToBloom(topics), Limit: limit, Cursor: cursor, Batch: true,
	})
	if err != nil {
		return nil, err
	}
	params := common.MessageParams{PoW: g.w.MinPow(), Payload: payload, WorkTime: wakuextWorkTime, Src: g.key}
	if asym {
		params.Dst = p.Node().Pubkey() // wakuext: publicKey = mailServerNode.Pubkey()
	} else {
		params.KeySym = g.msKey
	}
	msg, err := common.NewSentMessage(&params)
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
	return map[string]interface{}{"request": id, "pow": env.PoW(), "payload": hex.EncodeToString(payload),
		"asym": asym}, nil
}

func (g *statusPeer) requestPlain(lower, upper uint32, topics []common.TopicType, limit uint32, cursor []byte,
	byTopics bool) (map[string]interface{}, error) {
	p := g.lastReady()
	if p == nil {
		return nil, fmt.Errorf("request-plain: no ready peer")
	}
	u := uuid.New()
	id := []byte(hex.EncodeToString(u[:])) // createMessagesRequest: "converted to hex it's 32 bytes"
	req := common.MessagesRequest{ID: id, From: lower, To: upper, Limit: limit, Cursor: cursor}
	if byTopics {
		for _, t := range topics {
			req.Topics = append(req.Topics, append([]byte{}, t[:]...))
		}
	} else {
		// SendMessagesRequest collects the filters' topics into make([]TopicType, len(filters)) and then
		// appends, so the zero topic's bloom (bit 0 of byte 0) is ORed into every request it sends.
		req.Bloom = topicsToBloom(append([]common.TopicType{{}}, topics...))
	}
	// The ID status-go's events carry: gethcommon.BytesToHash(request.ID), i.e. the 32 ID bytes.
	g.mu.Lock()
	g.lastRequest, g.page = hex.EncodeToString(id), nil
	g.mu.Unlock()
	pid := p.ID()
	if err := g.w.SendMessagesRequest(pid[:], req); err != nil {
		return nil, err
	}
	raw, err := rlp.EncodeToBytes(req)
	if err != nil {
		return nil, err
	}
	return map[string]interface{}{"request": hex.EncodeToString(id), "payload": hex.EncodeToString(raw)}, nil
}

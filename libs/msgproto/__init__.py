"""The Messaging API's shared ``mailmesh.common.v1`` messages ⇄ ``msgstore.types`` domain values.

The send and subscription services (and the REST gateway after them) show the same WakuMessage,
MessageError and SendProgress; the conversions live here once (:mod:`msgproto.common`). The store's enums
carry the protos' numbers, so enums convert by value; instants are UNIX seconds (floats) in the domain and
``google.protobuf.Timestamp`` on the wire, an unset optional instant being None (or 0 for an error's time).
"""

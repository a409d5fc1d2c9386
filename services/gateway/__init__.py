"""The REST gateway: the Waku Messaging API over HTTP (MESSAGING-API "REST API" sections), over gRPC."""

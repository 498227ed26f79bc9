import assert from "node:assert/strict";
import ipaddr from "ipaddr.js";
import { logAddressPrefix } from "../../../../shared/src/net/address-bucket";

describe("shared: logAddressPrefix (request-log client address)", () => {
  it("keeps an IPv4 address's /24 only", () => {
    assert.equal(logAddressPrefix(ipaddr.parse("203.0.113.77")), "203.0.113.0/24");
    assert.equal(logAddressPrefix(ipaddr.parse("127.0.0.1")), "127.0.0.0/24");
  });

  it("keeps an IPv6 address's /48 only", () => {
    assert.equal(logAddressPrefix(ipaddr.parse("2001:db8:abcd:12:1:2:3:4")), "2001:db8:abcd::/48");
    assert.equal(logAddressPrefix(ipaddr.parse("::1")), "0:0:0::/48");
  });
});

// Preloaded into the reference Node.js servers of the interop tests (node --require ./loopback.cjs,
// or NODE_OPTIONS): every listening TCP socket that names no host is bound to 127.0.0.1, never
// to all interfaces, and each one reports its real port on stderr as "LISTENING http://127.0.0.1:PORT",
// so a server started with port 0 can be found.
"use strict";
const dns = require("node:dns");
const net = require("node:net");

const LOOPBACK = "127.0.0.1";

// net.Server.listen() resolves a host through dns.lookup(), asynchronously, even an IP literal;
// servers that read address() right after listen(0) (the conformance suite's do) need the
// synchronous bind they get without a host. So the literal resolves to itself at once.
const lookup = dns.lookup;
dns.lookup = function (hostname, options, callback) {
  const done = typeof options === "function" ? options : callback;
  if (hostname === LOOPBACK && typeof done === "function") {
    if (options && options.all) {
      done(null, [{ address: LOOPBACK, family: 4 }]);
    } else {
      done(null, LOOPBACK, 4);
    }
    return {};
  }
  return lookup.apply(this, arguments);
};

const listen = net.Server.prototype.listen;
const isPort = (value) => typeof value === "number" || (typeof value === "string" && /^\d+$/.test(value));

net.Server.prototype.listen = function (...args) {
  if (isPort(args[0]) && typeof args[1] !== "string") {
    args.splice(1, 0, LOOPBACK);
  } else if (args[0] && typeof args[0] === "object" && !(args[0] instanceof net.Server) && "port" in args[0] && !args[0].host) {
    args[0] = { ...args[0], host: LOOPBACK };
  }
  this.once("listening", () => {
    const address = this.address();
    if (address && typeof address === "object") {
      process.stderr.write(`LISTENING http://${LOOPBACK}:${address.port}\n`);
    }
  });
  return listen.apply(this, args);
};

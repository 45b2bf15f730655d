// The model gateway's forwarder for environments with node but no python3 (forward.py's twin).
//
//     node forward.js SOCKET PORT PORT_FILE
//
// Listens on 127.0.0.1:PORT (0: a free port) and pipes every connection, both ways, to the unix socket
// SOCKET; once it listens, writes the port and a newline to PORT_FILE (a file or a FIFO the caller waits
// on). Core modules only.
'use strict';
const fs = require('fs');
const net = require('net');

const args = process.argv.slice(2);
if (args.length !== 3) {
  process.stderr.write('usage: forward.js SOCKET PORT PORT_FILE\n');
  process.exit(2);
}
const [path, port, portFile] = args;

// Half-open both ways: an HTTP client may end its side and still read the answer.
const server = net.createServer({ allowHalfOpen: true }, (client) => {
  const upstream = net.connect({ path, allowHalfOpen: true });
  const drop = (error) => {
    if (error && error.syscall === 'connect') {
      process.stderr.write(`agentcompass forwarder: ${path}: ${error.message}\n`);
    }
    client.destroy();
    upstream.destroy();
  };
  client.on('error', drop);
  upstream.on('error', drop);
  client.pipe(upstream);
  upstream.pipe(client);
});
server.on('error', (error) => {
  process.stderr.write(`agentcompass forwarder: ${error.message}\n`);
  process.exit(1);
});
server.listen(Number(port), '127.0.0.1', () => {
  fs.writeFileSync(portFile, `${server.address().port}\n`);
});

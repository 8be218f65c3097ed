"""What every protocol of the server shares: sockets, connections, the rule of where a
request runs, access keys. Nothing here imports a protocol package."""

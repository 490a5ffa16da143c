package providerproc

import "net"

// FreePort asks the kernel for a TCP port on 127.0.0.1 that nothing listens
// on, for a provider that is a server to be told to listen on (opencode
// takes --port 0 as its default port, not as any free port). The port is
// free when FreePort returns; the provider should take it soon.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

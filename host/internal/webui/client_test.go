package webui_test

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	batonv1 "github.com/baton-run/baton/host/api/baton/v1"
)

// generatedClient is the page's TypeScript client, generated from
// baton.proto by make web.
const generatedClient = "../../../web/src/gen/baton_pb.ts"

var (
	tsMessage = regexp.MustCompile(`@generated from message (\S+)$`)
	tsField   = regexp.MustCompile(`@generated from field: .* (\w+) = (\d+);$`)
	tsRPC     = regexp.MustCompile(`@generated from rpc (\S+)$`)
)

// The page speaks the API the service serves: every message, field and
// rpc of baton.proto is in the generated client, and nothing else is. A
// change to the proto without make web fails here.
func TestClientIsGeneratedFromTheProto(t *testing.T) {
	want := protoNames(batonv1.File_baton_proto)
	got := clientNames(t, generatedClient)
	for _, n := range want {
		if !slices.Contains(got, n) {
			t.Errorf("baton.proto has %s; the page's client does not (run make web)", n)
		}
	}
	for _, n := range got {
		if !slices.Contains(want, n) {
			t.Errorf("the page's client has %s; baton.proto does not (run make web)", n)
		}
	}
}

// protoNames are a file's messages, fields (MESSAGE.NAME=NUMBER) and rpcs
// (SERVICE.METHOD).
func protoNames(fd protoreflect.FileDescriptor) []string {
	var out []string
	var messages func(ms protoreflect.MessageDescriptors)
	messages = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			m := ms.Get(i)
			if m.IsMapEntry() {
				continue
			}
			out = append(out, string(m.FullName()))
			for j := range m.Fields().Len() {
				f := m.Fields().Get(j)
				out = append(out, string(m.FullName())+"."+string(f.Name())+"="+strconv.Itoa(int(f.Number())))
			}
			messages(m.Messages())
		}
	}
	messages(fd.Messages())
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		for j := range s.Methods().Len() {
			out = append(out, string(s.Methods().Get(j).FullName()))
		}
	}
	return out
}

// clientNames are the same names as the generated client's comments say
// them.
func clientNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open the page's client: %v", err)
	}
	defer f.Close()
	var out []string
	var message string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 1<<24) // the file descriptor is one long line
	for sc.Scan() {
		line := sc.Text()
		if m := tsMessage.FindStringSubmatch(line); m != nil {
			message = m[1]
			out = append(out, message)
		} else if m := tsField.FindStringSubmatch(line); m != nil {
			out = append(out, message+"."+m[1]+"="+m[2])
		} else if m := tsRPC.FindStringSubmatch(line); m != nil {
			out = append(out, m[1])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read the page's client: %v", err)
	}
	return out
}

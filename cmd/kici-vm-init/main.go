// Command kici-vm-init is the init (PID 1) of the job VMs the qemu scaler
// starts: it prepares the guest, starts kici-agent with the configuration
// the scaler gave this VM, and powers the VM off when the agent ends
// (package internal/vmguest). `make vm-image` puts it in the guest's
// initramfs; it is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	"kici.dev/kici/internal/vmguest"
)

func main() {
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "kici-vm-init runs as PID 1 of a job VM (make vm-image puts it there); it is not meant to be run by hand")
		os.Exit(2)
	}
	os.Exit(vmguest.Main())
}

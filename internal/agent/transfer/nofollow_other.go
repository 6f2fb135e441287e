//go:build !unix

package transfer

const oNoFollow = 0

package a2a

import "net/http"

// restStatus is the HTTP status of each error over HTTP+JSON.
var restStatus = map[int]int{
	codeParse:            http.StatusBadRequest,
	codeInvalidRequest:   http.StatusBadRequest,
	codeMethodNotFound:   http.StatusNotFound,
	codeInvalidParams:    http.StatusBadRequest,
	codeInternal:         http.StatusInternalServerError,
	codeTaskNotFound:     http.StatusNotFound,
	codeNotCancelable:    http.StatusConflict,
	codePushNotSupported: http.StatusBadRequest,
	codeUnsupported:      http.StatusBadRequest,
	codeContentType:      http.StatusUnsupportedMediaType,
	codeNoExtendedCard:   http.StatusBadRequest,
	codeVersion:          http.StatusBadRequest,
}

// writeRESTError answers an HTTP+JSON request with rerr.
func writeRESTError(w http.ResponseWriter, d dialect, rerr *rpcError) {
	status := restStatus[rerr.Code]
	if status == 0 {
		status = http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]any{"error": rerr.in(d)})
}

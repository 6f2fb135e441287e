package apitypes

// AdminPrefix is the path prefix of every admin route.
const AdminPrefix = "/api/v1/admin"

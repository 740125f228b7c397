// User-assigned managed identity of the function app. A user-assigned identity (not a
// system-assigned one) exists before the site, so its role assignments on Key Vault and host
// storage are in place before the first Key Vault reference is resolved.
// Checked (search): Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31 in
// Azure/bicep-types-az generated/msi; properties.principalId and properties.clientId are read-only outputs.

@description('Identity name.')
param name string

@description('Azure region.')
param location string

@description('Resource tags.')
param tags object = {}

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: name
  location: location
  tags: tags
}

output id string = identity.id
output principalId string = identity.properties.principalId
output clientId string = identity.properties.clientId

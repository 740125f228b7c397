// Key Vault (RBAC mode) holding the app's three secrets:
//   queue-storage-connection   account-key connection string of the data account (built here with
//                              listKeys, so the key never leaves ARM as an output or parameter)
//   queue-storage-more-connections  the further data accounts' connection strings, space-separated,
//                              in account order (only when there are several accounts)
//   queue-root-access-token    the static root client's access token
//   queue-token-encryption-key 32 random bytes, base64: encrypts client access tokens at rest
// The app identity gets Key Vault Secrets User on each of those three secrets only (secret scope),
// not on the vault. The vault stays publicly reachable: on Flex Consumption, Key Vault references
// do not resolve through a network-restricted vault.
// Checked (search, Azure/bicep-types-az generated/keyvault 2023-07-01): vaults properties
//   tenantId, sku {family 'A', name}, enableRbacAuthorization, enableSoftDelete,
//   softDeleteRetentionInDays (7-90), enablePurgeProtection (true or omitted, never false),
//   publicNetworkAccess, networkAcls; vaults/secrets properties value, contentType, read-only secretUri.
//   Storage listKeys() output keys[].value (generated/storage 2023-05-01).
//   Role assignment at secret scope: used in public templates (Terraform scope = .../secrets/<name>);
//   Key Vault RBAC documents per-secret scope.

import { builtInRoleIds } from 'roles.bicep'

@description('Key Vault name (3-24 characters, globally unique).')
@minLength(3)
@maxLength(24)
param name string

@description('Azure region.')
param location string

@description('Resource tags.')
param tags object = {}

@description('Name of the queue data storage account, whose key goes into the connection-string secret.')
param dataStorageAccountName string

@description('Names of the further data accounts, in the order the app places data on them (empty: one account).')
param moreDataStorageAccountNames array = []

@description('Principal (object) id of the function app identity; it may read the three secrets.')
param appPrincipalId string

@description('Optional operator principal granted Key Vault Secrets Officer on the vault (read and rotate secrets). Empty: none.')
param adminPrincipalId string = ''

@description('Type of adminPrincipalId.')
@allowed([
  'User'
  'Group'
  'ServicePrincipal'
])
param adminPrincipalType string = 'User'

@description('Purge protection cannot be turned off again once on; it blocks re-creating a vault with the same name during the retention period.')
param enablePurgeProtection bool = true

@description('Days a deleted vault or secret can be recovered.')
@minValue(7)
@maxValue(90)
param softDeleteRetentionInDays int = 90

@secure()
@description('Root client access token (QUEUE_ROOT_ACCESS_TOKEN).')
param rootAccessToken string

@secure()
@description('Token encryption key: 32 random bytes, base64 (QUEUE_TOKEN_ENCRYPTION_KEY).')
param tokenEncryptionKey string

resource dataStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: dataStorageAccountName
}

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' = {
  name: name
  location: location
  tags: tags
  properties: {
    tenantId: subscription().tenantId
    sku: {
      family: 'A'
      name: 'standard'
    }
    enableRbacAuthorization: true
    enableSoftDelete: true
    softDeleteRetentionInDays: softDeleteRetentionInDays
    enablePurgeProtection: enablePurgeProtection ? true : null
    enabledForDeployment: false
    enabledForDiskEncryption: false
    enabledForTemplateDeployment: false
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource storageConnectionSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'queue-storage-connection'
  properties: {
    contentType: 'Azure Storage connection string (account key)'
    value: 'DefaultEndpointsProtocol=https;AccountName=${dataStorage.name};AccountKey=${dataStorage.listKeys().keys[0].value};EndpointSuffix=${environment().suffixes.storage}'
  }
}

resource moreDataStorage 'Microsoft.Storage/storageAccounts@2023-05-01' existing = [
  for n in moreDataStorageAccountNames: {
    name: n
  }
]

// Connection strings hold no whitespace, so one space separates them (shared/config.ts splits on it).
// A module joins them: listKeys() runs during the deployment, and only a resource or module property
// may loop over such values (a variable's loop may not: BCP182; a function argument may not: BCP138).
// They travel in a secure object, which the deployment history does not record.
module moreStorageConnections 'joined-secret.bicep' = if (!empty(moreDataStorageAccountNames)) {
  name: 'queue-storage-more-connections'
  params: {
    vaultName: vault.name
    secretName: 'queue-storage-more-connections'
    contentType: 'Azure Storage connection strings (account key), space-separated'
    parts: {
      items: [
        for (n, i) in moreDataStorageAccountNames: 'DefaultEndpointsProtocol=https;AccountName=${n};AccountKey=${moreDataStorage[i].listKeys().keys[0].value};EndpointSuffix=${environment().suffixes.storage}'
      ]
    }
    readerPrincipalId: appPrincipalId
  }
}

resource rootAccessTokenSecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'queue-root-access-token'
  properties: {
    contentType: 'Taskcluster access token'
    value: rootAccessToken
  }
}

resource tokenEncryptionKeySecret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: 'queue-token-encryption-key'
  properties: {
    contentType: 'base64, 32 bytes'
    value: tokenEncryptionKey
  }
}

resource readStorageConnection 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(storageConnectionSecret.id, appPrincipalId, builtInRoleIds.keyVaultSecretsUser)
  scope: storageConnectionSecret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.keyVaultSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource readRootAccessToken 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(rootAccessTokenSecret.id, appPrincipalId, builtInRoleIds.keyVaultSecretsUser)
  scope: rootAccessTokenSecret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.keyVaultSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource readTokenEncryptionKey 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(tokenEncryptionKeySecret.id, appPrincipalId, builtInRoleIds.keyVaultSecretsUser)
  scope: tokenEncryptionKeySecret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.keyVaultSecretsUser)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource adminSecretsOfficer 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(adminPrincipalId)) {
  name: guid(vault.id, adminPrincipalId, builtInRoleIds.keyVaultSecretsOfficer)
  scope: vault
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.keyVaultSecretsOfficer)
    principalId: adminPrincipalId
    principalType: adminPrincipalType
  }
}

output name string = vault.name
output storageConnectionSecretUri string = storageConnectionSecret.properties.secretUri
output moreStorageConnectionsSecretUri string = empty(moreDataStorageAccountNames) ? '' : moreStorageConnections!.outputs.secretUri
output rootAccessTokenSecretUri string = rootAccessTokenSecret.properties.secretUri
output tokenEncryptionKeySecretUri string = tokenEncryptionKeySecret.properties.secretUri
output rootAccessTokenSecretName string = rootAccessTokenSecret.name

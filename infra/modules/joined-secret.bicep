// A Key Vault secret whose value is a list of strings joined by single spaces, readable by one
// principal (Key Vault Secrets User on this secret only). The list comes in a secure object because
// its items are computed during the deployment (listKeys()), which only a module property may loop
// over, and a secure parameter keeps them out of the deployment history.

import { builtInRoleIds } from 'roles.bicep'

@description('Name of the existing Key Vault (RBAC mode).')
param vaultName string

@description('Secret name.')
param secretName string

@description('Secret content type.')
param contentType string

@secure()
@description('{ items: string[] }: the values to join with single spaces.')
param parts object

@description('Principal (object) id that may read the secret.')
param readerPrincipalId string

resource vault 'Microsoft.KeyVault/vaults@2023-07-01' existing = {
  name: vaultName
}

resource secret 'Microsoft.KeyVault/vaults/secrets@2023-07-01' = {
  parent: vault
  name: secretName
  properties: {
    contentType: contentType
    value: join(parts.items, ' ')
  }
}

resource readSecret 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(vault.id, secretName, readerPrincipalId, builtInRoleIds.keyVaultSecretsUser)
  scope: secret
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.keyVaultSecretsUser)
    principalId: readerPrincipalId
    principalType: 'ServicePrincipal'
  }
}

output secretUri string = secret.properties.secretUri

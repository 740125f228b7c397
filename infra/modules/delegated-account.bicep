// An existing storage account whose tables and containers Auth hands out SAS for (azureTableSAS,
// azureContainerSAS), reached through the app identity with no key in the app settings: the
// identity's roles on the account, and the account's QUEUE_AZURE_ACCOUNTS entry in the identity
// form (shared/config.ts). Deployed at the account's resource group (main.bicep's module scope).
//   Storage Blob Data Contributor   containers: create, list, get user delegation keys (the
//                                   generateUserDelegationKey action is part of it, so Storage Blob
//                                   Delegator would add nothing); a user delegation SAS grants at
//                                   most what its signer may do, so read-write SAS need this role.
//   Storage Table Data Contributor  tables: create and list.
//   Reader and Data Access          listKeys: table SAS are signed with the account key, since the
//                                   Table SDK has no user delegation SAS; it cannot regenerate keys.
// The account must keep shared-key access on (allowSharedKeyAccess) for those table SAS to work.
// Checked (search, Azure/bicep-types-az generated/storage 2023-05-01): primaryEndpoints.blob and
//   .table (read-only); environment().resourceManager is ARM's endpoint of the deployment's cloud.

import { builtInRoleIds } from 'roles.bicep'

@description('Name of the existing storage account, in this module\'s resource group.')
@minLength(3)
@maxLength(24)
param accountName string

@description('Principal (object) id of the function app identity.')
param appPrincipalId string

@description('Client id of that identity: the app takes its credential by it.')
param appClientId string

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: accountName
}

resource blobContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, builtInRoleIds.storageBlobDataContributor)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.storageBlobDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource tableContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, builtInRoleIds.storageTableDataContributor)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.storageTableDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

resource keyReader 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, builtInRoleIds.readerAndDataAccess)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', builtInRoleIds.readerAndDataAccess)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

@description('The account\'s entry in QUEUE_AZURE_ACCOUNTS: the identity form, with its resourceId for table SAS.')
output setting object = {
  identity: true
  clientId: appClientId
  resourceId: account.id
  blobEndpoint: account.properties.primaryEndpoints.blob
  tableEndpoint: account.properties.primaryEndpoints.table
  managementEndpoint: environment().resourceManager
}
